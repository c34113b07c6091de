// e2e.test.mjs - a SandboxAgent on a scripted model, run with the SDK's
// run() on SbxSandboxClient, on local, docker (SBX_TEST_DOCKER_HOST) and
// every remote provider against its fake; then the state is serialized
// and a second Node process resumes it (and is refused with another
// manifest). SBX_OAI_PROVIDERS=local,docker limits the providers.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { REMOTE_PROVIDERS, here, providerHasUsers, providerSkip, sbxEnv } from './support.mjs';
import { FIXTURE, REPORT, USER, run, toolOutputs, workloadAgent, workloadManifest, workloadModel } from './workload.mjs';

const pexec = promisify(execFile);
const wanted = (process.env.SBX_OAI_PROVIDERS ?? ['local', 'docker', ...REMOTE_PROVIDERS].join(',')).split(',');

async function resumeChild(provider, dir, stateFile, mode) {
    const { stdout } = await pexec(process.execPath, [join(here, 'resume_child.mjs'), provider, dir, stateFile, mode], {
        timeout: 120_000,
    });
    return JSON.parse(stdout.trim().split('\n').pop());
}

for (const provider of wanted) {
    test(`workload on ${provider}: run(), serialize, resume in a second process`, { skip: providerSkip(provider) }, async () => {
        const users = providerHasUsers(provider);
        const env = await sbxEnv(provider);
        try {
            const client = env.client(users ? { runAs: USER } : {});
            const manifest = workloadManifest(env.dir, { users });
            const session = await client.create({ manifest });
            const model = workloadModel();
            const t0 = Date.now();
            const result = await run(workloadAgent(model, { users }), 'Fix the repository.', { sandbox: { session } });
            const out = toolOutputs(result);
            if (process.env.SBX_OAI_DEBUG) console.log(JSON.stringify(out, null, 1), `run: ${Date.now() - t0} ms`);
            assert.match(out.c1, /Make repo\/test\.sh pass/);
            assert.match(out.c2, /Process exited with code 1/);
            assert.match(out.c2, /FAIL: add 2 3 = -1/);
            assert.doesNotMatch(out.c3, /Failed|failed/, out.c3);
            assert.match(out.c4, /Process exited with code 0/);
            assert.match(out.c4, /PASS/);
            assert.match(out.c7, /applied|Created|Updated|^$/i, out.c7);
            assert.equal(result.finalOutput, 'Fixed add(); the report is in output/report.md.');
            // The fixture: with a declared user (docker) both writes are
            // refused by the modes; without users the commands run as the
            // provider's default user (root here), which modes do not stop.
            const fixture = Buffer.from(await session.readFile({ path: 'fixtures/expected.txt' })).toString();
            if (users) {
                assert.match(out.c5, /Permission denied/, out.c5);
                assert.doesNotMatch(out.c5, /Process exited with code 0/);
                assert.match(out.c6, /^\[failed\] .*Permission denied/, out.c6);
                assert.equal(fixture, FIXTURE);
                // The report is the declared user's.
                assert.match(out.c8, new RegExp(`report\\.md`));
                const own = await session.exec({ cmd: 'stat -c %U output/report.md' });
                assert.equal(own.stdout.trim(), USER);
            }
            const report = Buffer.from(await session.readFile({ path: 'output/report.md' })).toString();
            assert.equal(report.trim(), REPORT.trim());

            const serialized = await client.serializeSessionState(session.state);
            const text = JSON.stringify(serialized);
            assert.ok(!text.includes(env.dir), 'no host path in the state');
            assert.ok(!text.includes('/tmp/'), 'no host path in the state');
            assert.deepEqual(Object.keys(serialized).sort(), ['manifestDigest', 'provider', 'sbxStateVersion', 'sessionKey', ...(users ? ['runAs'] : [])].sort());
            const stateFile = join(env.dir, 'state.json');
            writeFileSync(stateFile, text);
            await client.close(); // the first process lets go of its sbx mcp

            const refused = await resumeChild(provider, env.dir, stateFile, 'different');
            assert.equal(refused.ok, false, 'a resume with another manifest is refused');
            if (process.env.SBX_OAI_DEBUG) console.log('refused:', refused.error);
            assert.match(refused.error, /manifest/i, refused.error);

            const resumed = await resumeChild(provider, env.dir, stateFile, 'same');
            assert.equal(resumed.ok, true, resumed.error);
            assert.match(resumed.report, /fixed add\(\) in repo\/calc\.sh/);
        } finally {
            await env.cleanup();
        }
    });
}
