// exec_bench.mjs - SbxSandboxClient's execCommand against the SDK's own
// clients doing the same calls in the same run, interleaved (the order
// alternates each round): UnixLocalSandboxClient against sbx's local
// provider, and DockerSandboxClient against sbx's docker provider when
// SBX_TEST_DOCKER_HOST names a daemon (both use the image
// SBX_TEST_DOCKER_IMAGE, default sbx-test:busybox; DockerSandboxClient
// drives it with the docker CLI, so DOCKER_HOST is set to the same daemon).
//
//   node bench/exec_bench.mjs [ROUNDS] [COMMAND]     (default 200, "true")
//
// Prints per backend the median and mean wall time of one execCommand and
// the ratio sbx/SDK of the medians (target <= 1.0).
import { performance } from 'node:perf_hooks';
import { Manifest } from '@openai/agents-core/sandbox';
import { DockerSandboxClient, UnixLocalSandboxClient } from '@openai/agents-core/sandbox/local';
import { sbxEnv } from '../test/support.mjs';

const rounds = Number(process.argv[2] ?? 200);
const cmd = process.argv[3] ?? 'true';
const WARMUP = 10;

function stats(xs) {
    const s = [...xs].sort((a, b) => a - b);
    const med = s[Math.floor(s.length / 2)];
    const mean = s.reduce((a, b) => a + b, 0) / s.length;
    return { med, mean, p90: s[Math.floor(s.length * 0.9)] };
}

async function timed(session) {
    const t = performance.now();
    const out = await session.execCommand({ cmd, yieldTimeMs: 10_000 });
    const dt = performance.now() - t;
    if (!/Process exited with code 0/.test(out)) throw new Error(`unexpected result: ${out}`);
    return dt;
}

async function compare(name, sbxSession, sdkSession) {
    for (let i = 0; i < WARMUP; i++) {
        await timed(sbxSession);
        await timed(sdkSession);
    }
    const a = [];
    const b = [];
    for (let i = 0; i < rounds; i++) {
        if (i % 2) {
            a.push(await timed(sbxSession));
            b.push(await timed(sdkSession));
        } else {
            b.push(await timed(sdkSession));
            a.push(await timed(sbxSession));
        }
    }
    const x = stats(a);
    const y = stats(b);
    const ratio = x.med / y.med;
    console.log(
        `${name}: execCommand(${JSON.stringify(cmd)}) x${rounds} interleaved: ` +
            `sbx median ${x.med.toFixed(2)} ms (mean ${x.mean.toFixed(2)}, p90 ${x.p90.toFixed(2)}), ` +
            `SDK median ${y.med.toFixed(2)} ms (mean ${y.mean.toFixed(2)}, p90 ${y.p90.toFixed(2)}), ` +
            `ratio ${ratio.toFixed(2)}x`,
    );
    return ratio;
}

const manifest = () => new Manifest({ entries: { 'hello.txt': { type: 'file', content: 'hi\n' } } });

// local
{
    const env = await sbxEnv('local');
    const sbx = await env.client().create({ manifest: manifest() });
    const sdk = await new UnixLocalSandboxClient().create({ manifest: manifest() });
    try {
        await compare('local (sbx local provider vs UnixLocalSandboxClient)', sbx, sdk);
    } finally {
        await sbx.delete();
        await sdk.delete();
        await env.cleanup();
    }
}

// docker
if (process.env.SBX_TEST_DOCKER_HOST) {
    const image = process.env.SBX_TEST_DOCKER_IMAGE || 'sbx-test:busybox';
    process.env.DOCKER_HOST = process.env.SBX_TEST_DOCKER_HOST;
    const env = await sbxEnv('docker');
    const sbx = await env.client().create({ manifest: manifest() });
    const sdk = await new DockerSandboxClient({ image }).create({ manifest: manifest() });
    try {
        await compare(`docker (sbx docker provider vs DockerSandboxClient, ${image})`, sbx, sdk);
    } finally {
        await sbx.delete();
        await sdk.delete();
        await env.cleanup();
    }
} else {
    console.log('docker: skipped (SBX_TEST_DOCKER_HOST is not set)');
}
