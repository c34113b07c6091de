// support.mjs - a private sbx environment for a test: a temporary
// directory with HOME, the state directory (the session store), the local
// provider's root and sbx.yaml for one provider; remote providers run
// against their fakes (tests/<provider>/fake_*.py) on loopback.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SbxSandboxClient } from '../src/index.js';

export const here = dirname(fileURLToPath(import.meta.url));
export const srcRoot = process.env.SBX_SOURCE_DIR ?? resolve(here, '../../..');
export const buildDir = process.env.SBX_BUILD_DIR ?? join(srcRoot, 'build/ci');
export const sbxBin = process.env.SBX_BIN ?? join(buildDir, 'bin/sbx');
export const pluginPath = process.env.SBX_PLUGIN_PATH ?? join(buildDir, 'providers');

/** Providers a test can run on, each with why it is skipped when it is. */
export function providerSkip(provider) {
    if (!existsSync(sbxBin)) return `no sbx binary at ${sbxBin} (set SBX_BIN or SBX_BUILD_DIR)`;
    if (provider === 'docker' && !process.env.SBX_TEST_DOCKER_HOST) return 'SBX_TEST_DOCKER_HOST is not set';
    return false;
}

async function startFake(script, mode, apiKey, dir) {
    const portFile = join(dir, 'fake-port');
    const args = [join(srcRoot, script), '--port-file', portFile, '--dir', dir, ...(mode ? ['--mode', mode] : []), ...(apiKey ? ['--api-key', apiKey] : [])];
    const child = spawn('python3', args, { stdio: ['ignore', 'ignore', 'inherit'] });
    for (let i = 0; i < 100; i++) {
        if (existsSync(portFile) && readFileSync(portFile, 'utf8').trim()) break;
        await new Promise((r) => setTimeout(r, 100));
    }
    const port = Number(readFileSync(portFile, 'utf8').trim());
    if (!port) throw new Error(`${script} did not start`);
    return { child, url: `http://127.0.0.1:${port}`, port };
}

/** What each provider's sbx.yaml and environment are (fakes for remote ones). */
const PROVIDERS = {
    local: { users: false, async setup(env) {
        return { yaml: `default_provider: local\nproviders:\n  local:\n    root: "${env.wsRoot}"\n` };
    } },
    docker: { users: true, async setup(env) {
        const image = process.env.SBX_TEST_DOCKER_IMAGE || 'sbx-test:busybox';
        return { yaml: `default_provider: docker\nproviders:\n  docker:\n    host: "${process.env.SBX_TEST_DOCKER_HOST}"\n    image: "${image}"\n    resource_dir: "${env.wsRoot}"\n` };
    } },
    e2b: { users: false, async setup(env) {
        const key = 'e2b_test_key_0123';
        env.fake = await startFake('tests/e2b/fake_e2b.py', 'e2b', key, env.fakeDir);
        return { vars: { E2B_API_KEY: key }, yaml: `default_provider: e2b\nproviders:\n  e2b:\n    api_url: "${env.fake.url}"\n    envd_url: "${env.fake.url}"\n    domain: e2b.local\n    retries: 1\n` };
    } },
    cube: { users: false, async setup(env) {
        // CubeAPI without authentication, as tests/e2b/test_e2b_procs.c runs it.
        env.fake = await startFake('tests/e2b/fake_e2b.py', 'cube', null, env.fakeDir);
        return { yaml: `default_provider: cube\nproviders:\n  cube:\n    api_url: "${env.fake.url}"\n    template: tpl\n    proxy_address: 127.0.0.1\n    proxy_port: ${env.fake.port}\n    retries: 1\n` };
    } },
    opensandbox: { users: false, async setup(env) {
        const key = 'os_test_key_0123';
        env.fake = await startFake('tests/opensandbox/fake_opensandbox.py', null, key, env.fakeDir);
        return { vars: { OPEN_SANDBOX_API_KEY: key }, yaml: `default_provider: opensandbox\nproviders:\n  opensandbox:\n    api_url: "${env.fake.url}"\n    workspace: /home/user/workspace\n    proc_dir: /home/user/.sbx-procs\n    retries: 2\n` };
    } },
    daytona: { users: false, async setup(env) {
        const key = 'dt_test_key_0123';
        env.fake = await startFake('tests/daytona/fake_daytona.py', null, key, env.fakeDir);
        return { vars: { DAYTONA_API_KEY: key }, yaml: `default_provider: daytona\nproviders:\n  daytona:\n    api_url: "${env.fake.url}/api"\n    retries: 2\n` };
    } },
};

export const REMOTE_PROVIDERS = ['e2b', 'cube', 'opensandbox', 'daytona'];

/** Whether sbx's provider declares users (SBX_CAP_USERS) in our setup. */
export function providerHasUsers(provider) {
    return PROVIDERS[provider].users;
}

/**
 * A fresh sbx environment for `provider`: { dir, configPath, env (for the
 * sbx child), client(opts), cleanup() }. `dir` may be given to share the
 * session store with another process (the resume test).
 */
export async function sbxEnv(provider, { dir, keep = false, extraYaml = '' } = {}) {
    const own = !dir;
    dir ??= mkdtempSync(join(tmpdir(), `sbx-oai-${provider}-`));
    const env = { dir, home: join(dir, 'home'), state: join(dir, 'state'), wsRoot: join(dir, 'ws'), fakeDir: join(dir, 'fake') };
    for (const d of [env.home, env.state, env.wsRoot, env.fakeDir]) mkdirSync(d, { recursive: true, mode: 0o700 });
    env.configPath = join(dir, 'sbx.yaml');
    let vars = {};
    if (own || !existsSync(env.configPath)) {
        const s = await PROVIDERS[provider].setup(env);
        writeFileSync(env.configPath, s.yaml + extraYaml);
        vars = s.vars ?? {};
        writeFileSync(join(dir, 'vars.json'), JSON.stringify(vars));
    } else {
        vars = JSON.parse(readFileSync(join(dir, 'vars.json'), 'utf8'));
    }
    // Sanitizer options reach the sbx child (an ASan build's reports).
    const san = Object.fromEntries(['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS'].filter((k) => process.env[k]).map((k) => [k, process.env[k]]));
    env.childEnv = { HOME: env.home, XDG_STATE_HOME: env.state, SBX_PLUGIN_PATH: pluginPath, LC_ALL: 'C', ...san, ...vars };
    env.clients = [];
    env.client = (opts = {}) => {
        const c = new SbxSandboxClient({ sbxPath: sbxBin, configPath: env.configPath, provider, env: env.childEnv, ...opts });
        env.clients.push(c);
        return c;
    };
    env.cleanup = async () => {
        for (const c of env.clients) await c.close().catch(() => {});
        // A sanitizer build of sbx: its report (on the child's stderr) fails the test.
        await new Promise((r) => setTimeout(r, 100));
        const report = env.clients.map((c) => c.server.sanitizerReport).find(Boolean);
        if (report) {
            process.stderr.write(`sbx mcp sanitizer report:\n${report}\n`);
            throw new Error('sbx mcp wrote a sanitizer report (above)');
        }
        if (env.fake) {
            env.fake.child.kill('SIGTERM');
            await new Promise((r) => env.fake.child.once('exit', r));
        }
        if (own && !keep) rmSync(dir, { recursive: true, force: true });
    };
    return env;
}
