// common.mjs - what the MCP client tests and the benchmark share: a private
// sbx environment (HOME, XDG_STATE_HOME, a workspace root, sbx.yaml) for
// the local or the docker provider, and the environment `sbx mcp` and
// `sbx` run with.
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'node:http';
import { join } from 'node:path';

// A TCP port free on this host now (for the session's declared port).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// One call of the Engine API of SBX_TEST_DOCKER_HOST (a unix socket).
function dockerApi(method, path, body) {
  const host = process.env.SBX_TEST_DOCKER_HOST || '';
  const socketPath = host.replace(/^unix:\/\//, '');
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers: { 'Content-Type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

// The test daemon has no default bridge (scripts/services/dockerd.sh
// starts it with --bridge=none): a session that publishes ports needs a
// bridge network of its own. Returns its name and a function removing it.
export async function dockerBridge(name) {
  const r = await dockerApi('POST', '/v1.41/networks/create', { Name: name, Driver: 'bridge' });
  if (r.status !== 201 && r.status !== 409) throw new Error(`creating network ${name}: ${r.status} ${r.text}`);
  return { name, remove: () => dockerApi('DELETE', `/v1.41/networks/${name}`).catch(() => {}) };
}

// SBX (the sbx binary) and SBX_PLUGIN_PATH (the build's providers) come
// from the runner script; provider is "local" or "docker".
export function makeEnv(provider, { ports = [], network = null } = {}) {
  const sbx = process.env.SBX;
  const plugins = process.env.SBX_PLUGIN_PATH;
  if (!sbx || !plugins) throw new Error('SBX and SBX_PLUGIN_PATH must be set (run through the runner script)');
  const dir = mkdtempSync('/tmp/sbx-mcp-node-');
  const home = join(dir, 'home');
  const state = join(dir, 'state');
  const ws = join(dir, 'ws');
  for (const d of [home, state, ws]) mkdirSync(d, { mode: 0o700 });
  let yaml;
  if (provider === 'local') {
    yaml = `default_provider: local\nproviders:\n  local:\n    root: "${ws}"\n`;
  } else if (provider === 'docker') {
    const host = process.env.SBX_TEST_DOCKER_HOST;
    if (!host) throw new Error('SBX_TEST_DOCKER_HOST is not set');
    const image = process.env.SBX_TEST_DOCKER_IMAGE || 'sbx-test:busybox';
    yaml = `default_provider: docker\nproviders:\n  docker:\n    host: "${host}"\n` +
      `    image: "${image}"\n    resource_dir: "${ws}"\n` +
      (network ? `    network: "${network}"\n` : '');
  } else {
    throw new Error(`unknown provider ${provider}`);
  }
  if (ports.length) yaml += `session:\n  ports: [${ports.join(', ')}]\n`;
  const config = join(dir, 'sbx.yaml');
  writeFileSync(config, yaml);
  const env = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    XDG_STATE_HOME: state,
    SBX_PLUGIN_PATH: plugins,
    SBX_CONFIG: config,
    LC_ALL: 'C',
  };
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']) {
    if (process.env[k]) env[k] = process.env[k];
  }
  return {
    sbx, provider, dir, ws, config, env,
    mcpArgs: (...extra) => ['mcp', '--config', config, '--tools', 'agent', ...extra],
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export function assert(cond, what) {
  if (!cond) throw new Error(`assertion failed: ${what}`);
}

export function assertEq(got, want, what) {
  if (got !== want) {
    throw new Error(`assertion failed: ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
