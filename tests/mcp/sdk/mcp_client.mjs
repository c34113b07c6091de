// mcp_client.mjs PROVIDER - `sbx mcp --tools agent` driven by the official
// MCP TypeScript SDK (@modelcontextprotocol/sdk Client over
// StdioClientTransport), on the local or the docker provider: the
// handshake, tools/list against docs/MCP.md, every tool of the agent group
// with its effect checked through another tool (or on the host), a
// cancelled long call whose command really stops, malformed requests (the
// JSON-RPC error codes) and tool errors (isError with a clear message).
// Exits nonzero on the first failed check.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, ErrorCode, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { makeEnv, freePort, dockerBridge, assert, assertEq, sleep } from './common.mjs';

const provider = process.argv[2] || 'local';
const AGENT_TOOLS = [
  'create_sandbox', 'connect_sandbox', 'destroy_sandbox', 'list_sandboxes',
  'exec_command', 'write_stdin', 'kill_process', 'read_file', 'write_file', 'list_files',
  'stat', 'mkdir', 'move', 'delete', 'search', 'git_clone', 'snapshot',
  'restore', 'port_url',
];
const SDK_TOOLS = ['snapshot_read', 'snapshot_write', 'add_user', 'apply_manifest'];

const port = await freePort();
const bridge = provider === 'docker' ? await dockerBridge(`sbx-mcp-node-${process.pid}`) : null;
const env = makeEnv(provider, { ports: [port], network: bridge?.name });
const transport = new StdioClientTransport({
  command: env.sbx,
  args: env.mcpArgs(),
  env: env.env,
  cwd: env.dir,
  stderr: 'pipe',
});
let serverLog = '';
transport.stderr.on('data', (d) => {
  serverLog += d.toString();
  if (serverLog.length > 1 << 20) serverLog = serverLog.slice(-(1 << 19));
});
const client = new Client({ name: 'sbx-mcp-node-test', version: '1.0.0' });
const sb = `mcp-node-${provider}-${process.pid}`;
let passed = 0;
const cleanups = [];

function ok(what) {
  passed++;
  console.log(`ok ${passed} - ${provider}: ${what}`);
}

function textOf(res) {
  return (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// A tool call that must succeed: returns structuredContent, checked to be
// the same JSON as the text content (docs/MCP.md, "Tools").
async function call(name, args, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  if (res.isError) throw new Error(`${name} failed: ${textOf(res)}`);
  const sc = res.structuredContent;
  assert(sc && typeof sc === 'object', `${name} returns structuredContent`);
  assert(JSON.stringify(JSON.parse(textOf(res))) === JSON.stringify(sc),
    `${name}: the text content is the structured content as JSON`);
  return sc;
}

// A tool call that must fail as a tool error naming `want`.
async function callErr(name, args, want) {
  const res = await client.callTool({ name, arguments: args });
  assert(res.isError === true, `${name}(${JSON.stringify(args)}) is a tool error, got ${JSON.stringify(res)}`);
  const text = textOf(res);
  assert(/^sbx: /.test(text), `${name}: the error text starts with "sbx: ": ${text}`);
  for (const w of [].concat(want)) {
    assert(text.includes(w), `${name}: the error text names ${JSON.stringify(w)}: ${text}`);
  }
  return text;
}

// A request that must be refused with JSON-RPC error `code`.
async function rpcErr(promise, code, what) {
  try {
    await promise;
  } catch (e) {
    assert(e instanceof McpError, `${what}: an McpError, got ${e}`);
    assertEq(e.code, code, `${what}: JSON-RPC error code`);
    return e;
  }
  throw new Error(`${what}: succeeded, expected JSON-RPC error ${code}`);
}

// Run a shell command in the sandbox to completion; returns the result.
async function sh(cmd, extra = {}) {
  const r = await call('exec_command', { sandbox: sb, cmd, yield_time_ms: 30000, ...extra });
  assertEq(r.running, false, `"${cmd}" finished`);
  return r;
}

async function main() {
  // ---- handshake and tools/list --------------------------------------
  await client.connect(transport);
  const info = client.getServerVersion();
  assert(info && info.name, 'serverInfo has a name');
  assert(client.getServerCapabilities()?.tools, 'the server declares the tools capability');
  ok(`initialize (${info.name} ${info.version}, protocol ${LATEST_PROTOCOL_VERSION} asked)`);

  const { tools } = await client.listTools();
  const byName = new Map(tools.map((t) => [t.name, t]));
  for (const name of AGENT_TOOLS) {
    const t = byName.get(name);
    assert(t, `tools/list has ${name}`);
    assertEq(t.inputSchema?.type, 'object', `${name}: inputSchema is an object schema`);
    assert(typeof t.description === 'string' && t.description.length > 0, `${name} has a description`);
  }
  for (const name of SDK_TOOLS) assert(!byName.has(name), `--tools agent does not offer ${name}`);
  ok(`tools/list: all ${AGENT_TOOLS.length} agent tools with input schemas, no sdk tools`);

  // ---- sandboxes -----------------------------------------------------
  const created = await call('create_sandbox', { sandbox: sb });
  assertEq(created.sandbox, sb, 'create_sandbox: the key');
  assertEq(created.provider, provider, 'create_sandbox: the provider');
  assertEq(created.created, true, 'create_sandbox: created');
  cleanups.push(() => client.callTool({ name: 'destroy_sandbox', arguments: { sandbox: sb } }));
  ok('create_sandbox');

  const listed = await call('list_sandboxes', {});
  const mine = listed.sandboxes.find((s) => s.sandbox === sb);
  assert(mine && mine.provider === provider, `list_sandboxes lists ${sb}: ${JSON.stringify(listed)}`);
  assertEq(listed.truncated, false, 'list_sandboxes: not truncated');
  // The CLI sees the same session (one store).
  const cli = spawnSync(env.sbx, ['sessions'], { env: env.env, encoding: 'utf8' });
  assert(cli.status === 0 && cli.stdout.includes(sb), `sbx sessions lists ${sb}: ${cli.stdout}${cli.stderr}`);
  ok('list_sandboxes (and `sbx sessions` agrees)');

  const conn = await call('connect_sandbox', { sandbox: sb });
  assertEq(conn.sandbox, sb, 'connect_sandbox: the key');
  await callErr('connect_sandbox', { sandbox: 'no-such-sandbox-here' }, 'no-such-sandbox-here');
  ok('connect_sandbox (and a missing one is a tool error naming it)');

  // ---- exec_command and write_stdin -----------------------------------
  let r = await call('exec_command', {
    sandbox: sb, cmd: 'echo "out:$FOO"; echo err >&2; pwd; exit 3',
    env: { FOO: 'bar' }, yield_time_ms: 30000,
  });
  assertEq(r.running, false, 'quick exec: finished');
  assertEq(r.exit_code, 3, 'quick exec: exit code');
  assert(r.stdout.includes('out:bar'), `quick exec: env reaches the command: ${r.stdout}`);
  assertEq(r.stderr, 'err\n', 'quick exec: stderr apart');
  assert(r.output.includes('out:bar') && r.output.includes('err'), 'quick exec: output holds both');
  assert(!('process_id' in r) || r.process_id == null, 'quick exec: no process id once exited');
  assert(typeof r.wall_time_ms === 'number', 'quick exec: wall_time_ms');
  r = await call('exec_command', { sandbox: sb, argv: ['sh', '-c', 'echo "$1"', 'sh', 'a b;c'], yield_time_ms: 30000 });
  assertEq(r.stdout, 'a b;c\n', 'argv is passed as it is, no shell in between');
  await sh('mkdir -p sub/dir');
  r = await sh('pwd', { cwd: 'sub/dir' });
  assert(r.stdout.trim().endsWith('/sub/dir'), `cwd is honoured: ${r.stdout}`);
  r = await sh('head -c 100000 /dev/zero | tr "\\0" x', { max_output_bytes: 1000 });
  // The head and the tail of the output are kept, with a marker between.
  const kept = (r.stdout.match(/x/g) || []).length;
  assert(kept <= 1000 && kept >= 900 && r.stdout.length < 1200, `max_output_bytes caps the output: ${kept} bytes kept of ${r.stdout.length}`);
  assertEq(r.truncated_bytes, 100000 - kept, 'truncated_bytes counts what was cut');
  ok('exec_command, quick: exit code, stdout/stderr, env, argv, cwd, output cap');

  r = await call('exec_command', {
    sandbox: sb, cmd: 'echo start; read line; echo "got:$line"; exit 7', yield_time_ms: 300,
  });
  assertEq(r.running, true, 'yielding exec: still running');
  assertEq(r.exit_code, null, 'yielding exec: no exit code yet');
  assert(r.process_id != null, 'yielding exec: a process id');
  assert(r.output.includes('start'), `yielding exec: the output so far: ${r.output}`);
  const pid = r.process_id;
  r = await call('write_stdin', { sandbox: sb, process_id: pid, chars: 'hello\n', yield_time_ms: 30000 });
  assertEq(r.running, false, 'write_stdin: the command finished');
  assertEq(r.exit_code, 7, 'write_stdin: its exit code');
  assert(r.output.includes('got:hello'), `write_stdin: the command read the chars: ${r.output}`);
  assert(!r.output.includes('start'), `write_stdin: only the new output: ${r.output}`);
  // A finished process's id is unknown, and so is a running one's in
  // another sandbox.
  await callErr('write_stdin', { sandbox: sb, process_id: pid, chars: 'x' }, []);
  const other = `${sb}-other`;
  await call('create_sandbox', { sandbox: other });
  r = await call('exec_command', { sandbox: sb, cmd: 'read x; echo "mine:$x"', yield_time_ms: 100 });
  assertEq(r.running, true, 'a process waiting for input');
  await callErr('write_stdin', { sandbox: other, process_id: r.process_id, chars: 'stolen\n' }, []);
  const own = await call('write_stdin', { sandbox: sb, process_id: r.process_id, chars: 'own\n', yield_time_ms: 30000 });
  assertEq(own.output, 'mine:own\n', 'the process got only its own sandbox\'s input');
  await call('destroy_sandbox', { sandbox: other });
  r = await call('exec_command', { sandbox: sb, cmd: 'cat', yield_time_ms: 100 });
  assertEq(r.running, true, 'cat waits for its input');
  r = await call('write_stdin', { sandbox: sb, process_id: r.process_id, chars: 'abc', close_stdin: true, yield_time_ms: 30000 });
  assertEq(r.running, false, 'close_stdin: cat ends at eof');
  assertEq(r.output, 'abc', 'close_stdin: cat echoed its input');
  ok('exec_command yielding, write_stdin continuing it (and closing stdin)');

  const progress = [];
  r = await call('exec_command', { sandbox: sb, cmd: 'sleep 2.5; echo slow', yield_time_ms: 30000 },
    { onprogress: (p) => progress.push(p), timeout: 60000 });
  assertEq(r.stdout, 'slow\n', 'a slow exec finishes');
  assert(progress.length >= 1, `a call with a progress token gets notifications/progress: ${JSON.stringify(progress)}`);
  ok(`exec_command with a progress token: ${progress.length} progress notifications in 2.5 s`);

  // ---- files ---------------------------------------------------------
  let w = await call('write_file', { sandbox: sb, path: 'notes/a.txt', content: 'hello\nworld\n' });
  assertEq(w.bytes, 12, 'write_file: bytes');
  r = await sh('cat notes/a.txt');
  assertEq(r.stdout, 'hello\nworld\n', 'write_file: the file holds the text');
  let f = await call('read_file', { sandbox: sb, path: 'notes/a.txt' });
  assertEq(f.content, 'hello\nworld\n', 'read_file: text');
  assertEq(f.size, 12, 'read_file: size');
  assertEq(f.truncated, false, 'read_file: not truncated');
  f = await call('read_file', { sandbox: sb, path: 'notes/a.txt', offset: 6, max_bytes: 3 });
  assertEq(f.content, 'wor', 'read_file: offset and max_bytes');
  assertEq(f.truncated, true, 'read_file: truncated when more follows');
  const bin = Buffer.from([0, 1, 2, 0xff, 0xfe, 10, 13, 0x80, 0]);
  w = await call('write_file', { sandbox: sb, path: 'notes/b.bin', content: bin.toString('base64'), encoding: 'base64', mode: '0640' });
  assertEq(w.bytes, bin.length, 'write_file base64: bytes');
  r = await sh('od -An -tx1 notes/b.bin | tr -d " \\n"');
  assertEq(r.stdout, bin.toString('hex'), 'write_file base64: the bytes on disk');
  f = await call('read_file', { sandbox: sb, path: 'notes/b.bin', encoding: 'base64' });
  assertEq(f.encoding, 'base64', 'read_file base64: encoding');
  assertEq(Buffer.from(f.content, 'base64').toString('hex'), bin.toString('hex'), 'read_file base64: the bytes');
  ok('write_file/read_file, text and base64, offset and size limit');

  let st = await call('stat', { sandbox: sb, path: 'notes/b.bin' });
  assertEq(st.exists, true, 'stat: exists');
  assertEq(st.type, 'file', 'stat: type');
  assertEq(st.size, bin.length, 'stat: size');
  assertEq((typeof st.mode === 'string' ? parseInt(st.mode, 8) : st.mode) & 0o777, 0o640, `stat: the mode write_file set (${st.mode})`);
  st = await call('stat', { sandbox: sb, path: 'notes/none' });
  assertEq(st.exists, false, 'stat: a missing path does not exist');
  ok('stat');

  await call('mkdir', { sandbox: sb, path: 'deep/er/est', parents: true });
  st = await call('stat', { sandbox: sb, path: 'deep/er/est' });
  assertEq(st.type, 'directory', 'mkdir parents: a directory');
  await callErr('mkdir', { sandbox: sb, path: 'x/y/z' }, 'x/y/z');
  ok('mkdir (parents; without them a missing parent is a tool error)');

  const ls = await call('list_files', { sandbox: sb, path: 'notes' });
  const names = ls.entries.map((e) => e.name).sort();
  assertEq(JSON.stringify(names), JSON.stringify(['a.txt', 'b.bin']), 'list_files: the names');
  const a = ls.entries.find((e) => e.name === 'a.txt');
  assertEq(a.type, 'file', 'list_files: type');
  assertEq(a.size, 12, 'list_files: size');
  const lim = await call('list_files', { sandbox: sb, path: 'notes', limit: 1 });
  assertEq(lim.entries.length, 1, 'list_files: limit');
  assertEq(lim.truncated, true, 'list_files: truncated at the limit');
  ok('list_files (entries, limit)');

  await call('move', { sandbox: sb, from: 'notes/a.txt', to: 'deep/a.txt' });
  assertEq((await call('stat', { sandbox: sb, path: 'notes/a.txt' })).exists, false, 'move: the source is gone');
  assertEq((await call('read_file', { sandbox: sb, path: 'deep/a.txt' })).content, 'hello\nworld\n', 'move: the target has it');
  await call('write_file', { sandbox: sb, path: 'notes/c.txt', content: 'C' });
  await callErr('move', { sandbox: sb, from: 'notes/c.txt', to: 'deep/a.txt' }, []);
  assertEq((await call('read_file', { sandbox: sb, path: 'deep/a.txt' })).content, 'hello\nworld\n', 'move: no overwrite by default');
  await call('move', { sandbox: sb, from: 'notes/c.txt', to: 'deep/a.txt', overwrite: true });
  assertEq((await call('read_file', { sandbox: sb, path: 'deep/a.txt' })).content, 'C', 'move overwrite: replaced');
  ok('move (overwrite refused by default, allowed when asked)');

  await call('write_file', { sandbox: sb, path: 'src/one.c', content: 'int main(void) { return NEEDLE; }\n' });
  await call('write_file', { sandbox: sb, path: 'src/two.h', content: 'first\n#define NEEDLE 1\n' });
  await call('write_file', { sandbox: sb, path: 'src/three.c', content: 'nothing here\n' });
  let s = await call('search', { sandbox: sb, path: 'src', name: '*.c' });
  const found = s.matches.map((m) => m.path.replace(/^.*src\//, '')).sort();
  assertEq(JSON.stringify(found), JSON.stringify(['one.c', 'three.c']), 'search by name');
  s = await call('search', { sandbox: sb, path: 'src', content: 'NEEDLE' });
  const hits = s.matches.map((m) => `${m.path.replace(/^.*src\//, '')}:${m.line}`).sort();
  assertEq(JSON.stringify(hits), JSON.stringify(['one.c:1', 'two.h:2']), 'search by content: files and lines');
  assert(s.matches.every((m) => m.text.includes('NEEDLE')), 'search by content: the matching text');
  s = await call('search', { sandbox: sb, path: 'src', content: 'NEEDLE', max_results: 1 });
  assertEq(s.matches.length, 1, 'search: max_results');
  assertEq(s.truncated, true, 'search: truncated at max_results');
  ok('search (name glob, content with lines, bounded)');

  await call('delete', { sandbox: sb, path: 'notes/b.bin' });
  assertEq((await call('stat', { sandbox: sb, path: 'notes/b.bin' })).exists, false, 'delete: a file');
  await callErr('delete', { sandbox: sb, path: 'deep' }, 'deep');
  await call('delete', { sandbox: sb, path: 'deep', recursive: true });
  assertEq((await call('stat', { sandbox: sb, path: 'deep' })).exists, false, 'delete recursive: a tree');
  ok('delete (a non-empty directory needs recursive)');

  // ---- hostile paths ---------------------------------------------------
  await callErr('read_file', { sandbox: sb, path: '../../../../etc/passwd' }, []);
  await sh('ln -s /etc/passwd planted; ln -s / rootlink');
  await callErr('read_file', { sandbox: sb, path: 'planted' }, []);
  await callErr('write_file', { sandbox: sb, path: 'rootlink/tmp/sbx-mcp-escape', content: 'x' }, []);
  await callErr('list_files', { sandbox: sb, path: 'rootlink' }, []);
  await callErr('read_file', { sandbox: sb, path: 'notes/missing.txt' }, 'missing.txt');
  await callErr('read_file', { sandbox: sb, path: '/etc/passwd' }, []);
  // delete removes the links themselves, never what they point at.
  await call('delete', { sandbox: sb, path: 'planted' });
  await call('delete', { sandbox: sb, path: 'rootlink', recursive: true });
  r = await sh('test -e /etc/passwd && test -d /bin && ls -A | grep -c -e planted -e rootlink; true');
  assertEq(r.stdout.trim(), '0', 'delete of planted symlinks: the links are gone, their targets are not');
  ok('tool errors: .. and planted symlinks are not followed out, a missing file is named');

  // ---- git_clone ---------------------------------------------------------
  await gitClone();

  // ---- snapshot and restore ----------------------------------------------
  await call('write_file', { sandbox: sb, path: 'keep/state.txt', content: 'version 1\n' });
  const snap = await call('snapshot', { sandbox: sb, name: 'snap-1' });
  assertEq(snap.name, 'snap-1', 'snapshot: name');
  assert(snap.bytes > 0 && /^[0-9a-f]{64}$/.test(snap.sha256), `snapshot: bytes and sha256: ${JSON.stringify(snap)}`);
  await call('write_file', { sandbox: sb, path: 'keep/state.txt', content: 'version 2\n' });
  await call('write_file', { sandbox: sb, path: 'keep/new.txt', content: 'after\n' });
  await call('restore', { sandbox: sb, name: 'snap-1' });
  assertEq((await call('read_file', { sandbox: sb, path: 'keep/state.txt' })).content, 'version 1\n', 'restore: the content came back');
  assertEq((await call('stat', { sandbox: sb, path: 'keep/new.txt' })).exists, false, 'restore: a later file is gone');
  await callErr('snapshot', { sandbox: sb, name: '../evil' }, []);
  await callErr('restore', { sandbox: sb, name: 'never-made' }, 'never-made');
  ok('snapshot + restore (workspace content back; bad and unknown names refused)');

  // ---- a second server, the same store ---------------------------------
  const t2 = new StdioClientTransport({ command: env.sbx, args: env.mcpArgs(), env: env.env, cwd: env.dir, stderr: 'pipe' });
  const c2 = new Client({ name: 'sbx-mcp-node-test-2', version: '1.0.0' });
  await c2.connect(t2);
  try {
    const cs = await c2.callTool({ name: 'connect_sandbox', arguments: { sandbox: sb } });
    assert(!cs.isError, `a second sbx mcp connects to ${sb}: ${textOf(cs)}`);
    const rf = await c2.callTool({ name: 'read_file', arguments: { sandbox: sb, path: 'keep/state.txt' } });
    assertEq(rf.structuredContent?.content, 'version 1\n', 'a second sbx mcp reads what the first wrote');
  } finally {
    await c2.close();
  }
  ok('a second sbx mcp on the same configuration connects to the sandbox by key and sees its files');

  // ---- port_url ------------------------------------------------------------
  const pu = await call('port_url', { sandbox: sb, port });
  assertEq(pu.port !== undefined, true, 'port_url: port');
  assert(typeof pu.url === 'string' && /^https?:\/\//.test(pu.url), `port_url: a url: ${pu.url}`);
  assertEq(pu.tls, false, 'port_url: no tls');
  await reachPort(pu);
  await callErr('port_url', { sandbox: sb, port: port === 65535 ? 65534 : port + 1 }, String(port === 65535 ? 65534 : port + 1));
  ok(`port_url (the declared port ${port} is reached at ${pu.url}; an undeclared one is refused)`);

  // ---- cancellation ---------------------------------------------------------
  await cancelLongCall();

  // ---- malformed requests ------------------------------------------------
  await malformed();

  // ---- destroy ---------------------------------------------------------------
  const d = await call('destroy_sandbox', { sandbox: sb });
  assertEq(d.destroyed, true, 'destroy_sandbox: destroyed');
  cleanups.pop();
  await callErr('exec_command', { sandbox: sb, cmd: 'true' }, sb);
  const after = await call('list_sandboxes', {});
  assert(!after.sandboxes.some((x) => x.sandbox === sb), 'destroy_sandbox: no longer listed');
  ok('destroy_sandbox (the sandbox is gone for every tool)');
}

async function gitClone() {
  const hasGit = (await sh('command -v git >/dev/null && echo yes || echo no')).stdout.trim() === 'yes';
  if (!hasGit) {
    const text = await callErr('git_clone', { sandbox: sb, url: 'https://example.invalid/r.git', path: 'repo' }, 'git');
    ok(`git_clone without git in the sandbox: a clear tool error (${text.split('\n')[0]})`);
    return;
  }
  // A repository made here, served over git:// by `git daemon` on loopback
  // (file:// is refused: a tool call names no host path).
  const repoRoot = mkdtempSync('/tmp/sbx-mcp-git-');
  const g = (...a) => {
    const p = spawnSync('git', a, { cwd: join(repoRoot, 'r.git'), encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: repoRoot } });
    if (p.status !== 0) throw new Error(`git ${a.join(' ')}: ${p.stderr}`);
    return p.stdout.trim();
  };
  spawnSync('git', ['init', '-q', '-b', 'main', join(repoRoot, 'r.git')]);
  writeFileSync(join(repoRoot, 'r.git', 'README'), 'cloned through MCP\n');
  g('add', 'README');
  g('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'one');
  const head = g('rev-parse', 'HEAD');
  const gport = await freePort();
  const daemon = spawn('git', ['daemon', '--reuseaddr', '--export-all', '--listen=127.0.0.1', `--port=${gport}`,
    `--base-path=${repoRoot}`, repoRoot], { stdio: 'ignore' });
  try {
    await sleep(300);
    await callErr('git_clone', { sandbox: sb, url: `file://${repoRoot}/r.git`, path: 'bad' }, []);
    const c = await call('git_clone', { sandbox: sb, url: `git://127.0.0.1:${gport}/r.git`, path: 'repo', depth: 1 });
    assertEq(c.commit, head, 'git_clone: the commit checked out');
    assertEq((await call('read_file', { sandbox: sb, path: 'repo/README' })).content, 'cloned through MCP\n', 'git_clone: the work tree');
    ok('git_clone (a repository served on loopback; file:// refused)');
  } finally {
    daemon.kill();
    rmSync(repoRoot, { recursive: true, force: true });
  }
}

// Serve something on the declared port inside the sandbox and fetch it
// at the url port_url gave.
async function reachPort(pu) {
  await call('write_file', { sandbox: sb, path: 'www/index.html', content: 'served from the sandbox\n' });
  const r = await call('exec_command', {
    sandbox: sb, cwd: 'www', yield_time_ms: 200,
    cmd: `echo $$ > ../www.pid; if command -v python3 >/dev/null; then exec python3 -m http.server --bind 0.0.0.0 ${port}; ` +
      `else exec httpd -f -p ${port} -h .; fi`,
  });
  assert(r.running, `the web server runs: ${r.output}`);
  try {
    let body = '';
    for (let i = 0; i < 50 && !body; i++) {
      try {
        const res = await fetch(`${pu.url.replace(/\/$/, '')}/index.html`);
        body = await res.text();
      } catch {
        await sleep(100);
      }
    }
    assertEq(body, 'served from the sandbox\n', `port_url: ${pu.url} reaches the sandbox`);
  } finally {
    await sh('kill "$(cat www.pid)" 2>/dev/null; true');
  }
}

async function cancelLongCall() {
  const ac = new AbortController();
  const progress = [];
  const long = client.callTool(
    { name: 'exec_command', arguments: { sandbox: sb, cmd: 'echo $$ > long.pid; exec sleep 300', yield_time_ms: 120000 } },
    undefined, { signal: ac.signal, timeout: 180000, onprogress: (p) => progress.push(p) },
  );
  let pidText = '';
  for (let i = 0; i < 100 && !/^\d+$/.test(pidText); i++) {
    await sleep(50);
    const f = await client.callTool({ name: 'read_file', arguments: { sandbox: sb, path: 'long.pid' } });
    if (!f.isError) pidText = f.structuredContent.content.trim();
  }
  assert(/^\d+$/.test(pidText), 'the long command started');
  const t0 = Date.now();
  ac.abort('test cancels');
  let aborted = false;
  try {
    await long;
  } catch (e) {
    aborted = true;
  }
  assert(aborted, 'the cancelled call rejects on the client');
  let alive = true;
  for (let i = 0; i < 100 && alive; i++) {
    const r = await sh(`kill -0 ${pidText} 2>/dev/null && echo alive || echo gone`);
    alive = r.stdout.trim() === 'alive';
    if (alive) await sleep(50);
  }
  assert(!alive, `notifications/cancelled stopped the command (pid ${pidText} in the sandbox)`);
  // The server still serves, and no stray response for the cancelled id
  // broke the client (it would have raised through onerror).
  await sh('true');
  ok(`a cancelled exec_command (AbortSignal): the command is gone ${Date.now() - t0} ms later` +
    `, ${progress.length} progress notifications before`);
}

async function malformed() {
  // Methods and params through the client's own request path.
  await rpcErr(client.request({ method: 'no/such/method', params: {} }, (await import('@modelcontextprotocol/sdk/types.js')).EmptyResultSchema),
    ErrorCode.MethodNotFound, 'an unknown method');
  await rpcErr(client.callTool({ name: 'no_such_tool', arguments: {} }), ErrorCode.InvalidParams, 'an unknown tool');
  await rpcErr(client.callTool({ name: 'exec_command', arguments: { sandbox: sb, cmd: 42 } }), ErrorCode.InvalidParams,
    'arguments that break the schema (cmd: 42)');
  await rpcErr(client.callTool({ name: 'read_file', arguments: { sandbox: sb } }), ErrorCode.InvalidParams,
    'a missing required argument (read_file without path)');
  // The agent group's create_sandbox takes no manifest: a call cannot
  // bring host-side sources (or anything else) into a sandbox.
  await rpcErr(client.callTool({ name: 'create_sandbox', arguments: { sandbox: 'x', manifest: { entries: { a: { type: 'local_dir', src: '/etc' } } } } }),
    ErrorCode.InvalidParams, 'create_sandbox with a manifest under --tools agent');

  // Raw lines on the server's stdin, its raw stdout read alongside the
  // transport (the SDK drops answers with id null before onmessage, and
  // those with ids it never sent are caught here before the Protocol layer).
  const seen = [];
  const orig = transport.onmessage;
  transport.onmessage = (m, extra) => {
    if (m && 'id' in m && typeof m.id === 'string' && m.id.startsWith('raw-')) return;
    orig(m, extra);
  };
  let rawOut = '';
  const tap = (d) => {
    rawOut += d.toString();
    let nl;
    while ((nl = rawOut.indexOf('\n')) >= 0) {
      const line = rawOut.slice(0, nl);
      rawOut = rawOut.slice(nl + 1);
      try {
        const m = JSON.parse(line);
        if (m && (m.id === null || (typeof m.id === 'string' && m.id.startsWith('raw-')))) seen.push(m);
      } catch { /* the transport reports it */ }
    }
  };
  const stdout = transport._process.stdout;
  stdout.on('data', tap);
  const onerr = transport.onerror;
  transport.onerror = () => {}; // the id-null answers fail the SDK's schema
  const stdin = transport._process.stdin;
  const raw = (line) => stdin.write(line + '\n');
  raw('{"jsonrpc":"2.0","id":"raw-1","method":"tools/call","params":{"name":');      // not JSON
  raw('{"jsonrpc":"2.0","id":"raw-2","method":"tools/call","params":"wrong"}');     // params not structured
  raw('{"jsonrpc":"1.0","id":"raw-3","method":"tools/list"}');                      // not JSON-RPC 2.0
  raw('{"jsonrpc":"2.0","id":"raw-4","method":"tools/call","params":{"name":"stat","arguments":[1]}}');
  raw('[]');                                                                          // an empty batch
  raw('{"jsonrpc":"2.0","id":"raw-5","method":"tools/list"}');                      // still served
  for (let i = 0; i < 100 && !seen.some((m) => m.id === 'raw-5'); i++) await sleep(20);
  stdout.off('data', tap);
  transport.onmessage = orig;
  transport.onerror = onerr;
  const byId = (id) => seen.find((m) => m.id === id);
  const nulls = seen.filter((m) => m.id === null).map((m) => m.error?.code);
  assert(nulls.includes(ErrorCode.ParseError), `a line that is not JSON: -32700 with id null: ${JSON.stringify(nulls)}`);
  assert(nulls.includes(ErrorCode.InvalidRequest), `an empty batch: -32600 with id null: ${JSON.stringify(nulls)}`);
  assert(!byId('raw-1'), 'the unparsable line is not answered by the id inside it');
  // JSON-RPC 2.0: params that are not an object or array make the request invalid.
  assertEq(byId('raw-2')?.error?.code, ErrorCode.InvalidRequest, 'params that are not structured: -32600');
  assertEq(byId('raw-3')?.error?.code, ErrorCode.InvalidRequest, 'jsonrpc "1.0": -32600');
  assertEq(byId('raw-4')?.error?.code, ErrorCode.InvalidParams, 'arguments that are not an object: -32602');
  assert(Array.isArray(byId('raw-5')?.result?.tools), 'the server still answers after malformed lines');
  ok('malformed requests: -32700, -32600, -32601, -32602 (unknown tool, bad arguments), server unharmed');
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`not ok - ${provider}: ${e.stack || e}`);
  console.error(`--- sbx mcp stderr (tail) ---\n${serverLog.slice(-4000)}`);
}
for (const c of cleanups.reverse()) await c().catch(() => {});
// EOF on its stdin ends the server; its last words (a sanitizer's report
// in an ASan build) are checked, and shown.
const exited = new Promise((resolve) => transport._process?.once('exit', (code, sig) => resolve({ code, sig })));
await client.close().catch(() => {});
const end = await Promise.race([exited, sleep(10000).then(() => null)]);
if (!failed && (!end || end.code !== 0)) {
  failed = true;
  console.error(`not ok - ${provider}: sbx mcp did not exit 0 at EOF: ${JSON.stringify(end)}`);
}
await sleep(50);
if (/ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:/.test(serverLog)) {
  failed = true;
  console.error(`not ok - ${provider}: sanitizer report from sbx mcp:\n${serverLog.slice(-20000)}`);
}
env.cleanup();
await bridge?.remove();
if (failed) process.exit(1);
console.log(`${provider}: ${passed} checks passed`);
