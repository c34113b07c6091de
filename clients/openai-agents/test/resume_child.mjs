// resume_child.mjs PROVIDER DIR STATE_FILE same|different - the second
// Node process of the end-to-end test: it shares only the sbx environment
// (config, session store) and the serialized state with the first, and
// resumes through the SDK's run() with the current trusted manifest.
// Prints one JSON line: {ok, report?, error?}.
import { readFileSync } from 'node:fs';
import { providerHasUsers, sbxEnv } from './support.mjs';
import { ScriptedModel, assistantMessage, functionCall } from '@openai/agents-core/testing';
import { USER, run, toolOutputs, workloadAgent, workloadManifest } from './workload.mjs';

const [provider, dir, stateFile, mode] = process.argv.slice(2);
const users = providerHasUsers(provider);
const env = await sbxEnv(provider, { dir });
const client = env.client(users ? { runAs: USER } : {});
let out;
try {
    const state = await client.deserializeSessionState(JSON.parse(readFileSync(stateFile, 'utf8')));
    const manifest = workloadManifest(dir, { users, variant: mode === 'same' ? '' : ' (changed)' });
    const model = new ScriptedModel([
        [functionCall('exec_command', { cmd: 'cat output/report.md' }, { callId: 'r1' })],
        [assistantMessage('read it')],
    ]);
    const result = await run(workloadAgent(model, { users, manifest }), 'Read the report.', {
        sandbox: { client, sessionState: state, options: { manifest } },
    });
    out = { ok: true, report: toolOutputs(result).r1 };
} catch (error) {
    out = { ok: false, error: String(error?.message ?? error) };
}
await env.cleanup();
process.stdout.write(JSON.stringify(out) + '\n');
