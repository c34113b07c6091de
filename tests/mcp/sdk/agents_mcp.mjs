// agents_mcp.mjs PROVIDER - an OpenAI Agents SDK `Agent` whose tools are
// `sbx mcp` (MCPServerStdio), run offline by `run()` on a ScriptedModel
// (@openai/agents-core/testing) that creates a sandbox, runs a command,
// writes a file, reads it back and answers. The model's responders check
// the tool outputs it received on each turn; the final output and the
// sandbox's state are checked after the run.
import { Agent, run, MCPServerStdio, setTracingDisabled } from '@openai/agents';
import { ScriptedModel, functionCall, assistantMessage, modelResponder } from '@openai/agents-core/testing';
import { spawnSync } from 'node:child_process';
import { makeEnv, assert, assertEq } from './common.mjs';

setTracingDisabled(true);
const provider = process.argv[2] || 'local';
const env = makeEnv(provider);
const sb = `agent-${provider}-${process.pid}`;

// The output the run handed the model for `callId`, as the JSON the tool
// returned (the SDK passes MCP text content through as the output text).
function toolOutput(call, callId) {
  const item = call.request.input.find?.((i) => i.type === 'function_call_result' && i.callId === callId);
  assert(item, `turn ${call.index}: the model received the output of ${callId}`);
  let out = item.output;
  if (out && typeof out === 'object' && 'text' in out) out = out.text;
  if (Array.isArray(out)) out = out.map((o) => o.text ?? '').join('');
  assert(typeof out === 'string', `${callId}: a text output: ${JSON.stringify(item.output)}`);
  const parsed = JSON.parse(out);
  return parsed;
}

const seen = {};
const model = new ScriptedModel([
  [functionCall('create_sandbox', { sandbox: sb }, { callId: 'c-create' })],
  modelResponder((call) => {
    seen.create = toolOutput(call, 'c-create');
    assertEq(seen.create.sandbox, sb, 'create_sandbox output: the key');
    return [functionCall('exec_command', {
      sandbox: sb, cmd: 'echo "agent ran $((6*7))"; uname -s', yield_time_ms: 30000,
    }, { callId: 'c-exec' })];
  }),
  modelResponder((call) => {
    seen.exec = toolOutput(call, 'c-exec');
    assertEq(seen.exec.exit_code, 0, 'exec_command output: exit code');
    assert(seen.exec.stdout.startsWith('agent ran 42\n'), `exec_command output: stdout: ${seen.exec.stdout}`);
    return [functionCall('write_file', {
      sandbox: sb, path: 'out/report.md', content: `# Report\n\n${seen.exec.stdout.split('\n')[0]}\n`,
    }, { callId: 'c-write' })];
  }),
  modelResponder((call) => {
    seen.write = toolOutput(call, 'c-write');
    assert(seen.write.bytes > 0, `write_file output: bytes: ${JSON.stringify(seen.write)}`);
    return [functionCall('read_file', { sandbox: sb, path: 'out/report.md' }, { callId: 'c-read' })];
  }),
  modelResponder((call) => {
    seen.read = toolOutput(call, 'c-read');
    return [assistantMessage(`report says: ${seen.read.content.split('\n')[2]}`)];
  }),
]);

const server = new MCPServerStdio({
  name: 'sbx',
  command: env.sbx,
  args: env.mcpArgs(),
  env: env.env,
  cwd: env.dir,
  cacheToolsList: true,
});

let failed = false;
try {
  await server.connect();
  const tools = await server.listTools();
  for (const t of ['create_sandbox', 'exec_command', 'write_file', 'read_file']) {
    assert(tools.some((x) => x.name === t), `MCPServerStdio lists ${t}`);
  }
  const agent = new Agent({
    name: 'sbx worker',
    instructions: 'Use the sbx tools to do the task.',
    model,
    mcpServers: [server],
  });
  const result = await run(agent, 'Run a command in a new sandbox and write a report.');
  model.assertComplete();
  assertEq(result.finalOutput, 'report says: agent ran 42', 'the final output');
  assertEq(model.calls.length, 5, 'five model turns');
  const called = result.newItems.filter((i) => i.type === 'tool_call_item').map((i) => i.rawItem.name);
  assertEq(JSON.stringify(called), JSON.stringify(['create_sandbox', 'exec_command', 'write_file', 'read_file']),
    'the tools the run called');
  assertEq(seen.read.content, '# Report\n\nagent ran 42\n', 'read_file output: what write_file wrote');
  // The effect is real: the CLI reads the same file from the same session.
  const cat = spawnSync(env.sbx, ['exec', sb, '--', 'cat', 'out/report.md'], { env: env.env, encoding: 'utf8' });
  assertEq(cat.stdout, '# Report\n\nagent ran 42\n', `sbx exec cat reads the report (${cat.stderr})`);
  console.log(`ok - ${provider}: Agent + MCPServerStdio + ScriptedModel: 4 tool calls, final output "${result.finalOutput}"`);
} catch (e) {
  failed = true;
  console.error(`not ok - ${provider}: ${e.stack || e}`);
} finally {
  await server.callTool('destroy_sandbox', { sandbox: sb }).catch(() => {});
  await server.close().catch(() => {});
  env.cleanup();
}
process.exit(failed ? 1 : 0);
