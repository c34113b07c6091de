// unit.test.mjs - every SbxSandboxSession/SbxSandboxClient method against
// a real `sbx mcp` on the local provider.
import assert from 'node:assert/strict';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Manifest } from '@openai/agents-core/sandbox';
import { providerSkip, sbxEnv } from './support.mjs';
import { toSbxManifest } from '../src/index.js';

// A 1x1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

const skip = providerSkip('local');

describe('SbxSandboxClient on local', { skip }, () => {
    let env;
    let client;
    let session;
    let manifest;

    before(async () => {
        env = await sbxEnv('local', { extraYaml: 'session:\n  ports: [8080]\n' });
        const src = join(env.dir, 'src');
        mkdirSync(join(src, 'sub'), { recursive: true });
        writeFileSync(join(src, 'a.txt'), 'from host\n');
        writeFileSync(join(src, 'sub', 'b.bin'), Buffer.from([0, 1, 2, 255]));
        writeFileSync(join(env.dir, 'one.txt'), 'one host file\n');
        client = env.client();
        manifest = new Manifest({
            entries: {
                'hello.txt': { type: 'file', content: 'hello\n' },
                'bytes.bin': { type: 'file', content: new Uint8Array([9, 8, 7]) },
                'img.png': { type: 'file', content: new Uint8Array(PNG) },
                private: { type: 'dir', permissions: 0o700, children: { 'note.md': { type: 'file', content: 'n\n' } } },
                tree: { type: 'local_dir', src },
                'one.txt': { type: 'local_file', src: join(env.dir, 'one.txt') },
            },
            environment: { GREETING: 'hi-from-manifest' },
        });
        session = await client.create({ manifest });
    });

    after(async () => {
        await session?.delete().catch(() => {});
        await env?.cleanup();
    });

    test('create applies inline and host entries; readFile, listDir, exists', async () => {
        assert.equal(session.state.provider, 'local');
        assert.match(session.state.manifestDigest, /^[0-9a-f]{64}$/);
        // The digest is sbx's: the one connect_sandbox reports for this session.
        const connected = await client.server.call('connect_sandbox', { sandbox: session.state.sessionKey, manifest: (await toSbxManifest(manifest)).manifest });
        assert.equal(connected.manifest_digest, session.state.manifestDigest);
        assert.equal(Buffer.from(await session.readFile({ path: 'hello.txt' })).toString(), 'hello\n');
        assert.deepEqual([...(await session.readFile({ path: '/workspace/bytes.bin' }))], [9, 8, 7]);
        assert.equal(Buffer.from(await session.readFile({ path: 'tree/a.txt' })).toString(), 'from host\n');
        assert.deepEqual([...(await session.readFile({ path: 'tree/sub/b.bin' }))], [0, 1, 2, 255]);
        assert.equal(Buffer.from(await session.readFile({ path: 'one.txt' })).toString(), 'one host file\n');
        assert.equal(Buffer.from(await session.readFile({ path: 'hello.txt', maxBytes: 2 })).toString(), 'he');
        const names = (await session.listDir({ path: '.' })).map((e) => `${e.name}:${e.type}`).sort();
        for (const n of ['hello.txt:file', 'private:dir', 'tree:dir', 'one.txt:file']) assert.ok(names.includes(n), names.join(' '));
        const sub = await session.listDir({ path: 'tree' });
        assert.deepEqual(sub.map((e) => e.path).sort(), ['tree/a.txt', 'tree/sub']);
        assert.equal(await session.pathExists('hello.txt'), true);
        assert.equal(await session.pathExists('nope.txt'), false);
        assert.equal(await session.directoryExists('tree/sub'), true);
        assert.equal(await session.directoryExists('hello.txt'), false);
        const mode = await session.exec({ cmd: 'stat -c %a private' });
        assert.equal(mode.stdout.trim(), '700');
    });

    test('exec: exit code, streams, environment, workdir', async () => {
        const r = await session.exec({ cmd: 'echo out; echo err >&2; echo "$GREETING"; exit 3' });
        assert.equal(r.exitCode, 3);
        assert.equal(r.sessionId, undefined);
        assert.match(r.stdout, /out\nhi-from-manifest/);
        assert.equal(r.stderr, 'err\n');
        assert.match(r.output, /out/);
        const text = await session.execCommand({ cmd: 'pwd', workdir: 'tree/sub' });
        assert.match(text, /^Chunk ID: \w{6}\nWall time: \d+\.\d{4} seconds\nProcess exited with code 0\nOutput:\n.*tree\/sub\n$/s);
    });

    test('exec yields a running process; writeStdin feeds and polls it', async () => {
        const r = await session.exec({ cmd: 'read line; echo "got $line"; sleep 0.2; echo end', yieldTimeMs: 100 });
        assert.equal(r.exitCode, undefined);
        assert.equal(typeof r.sessionId, 'number');
        const a = await session.writeStdin({ sessionId: r.sessionId, chars: 'abc\n', yieldTimeMs: 3000 });
        assert.match(a, /got abc/);
        if (/Process running with session ID/.test(a)) {
            const b = await session.writeStdin({ sessionId: r.sessionId, yieldTimeMs: 3000 });
            assert.match(b, /Process exited with code 0/);
        } else {
            assert.match(a, /Process exited with code 0\n/);
        }
        // The id is gone once the process ended.
        const gone = await session.writeStdin({ sessionId: r.sessionId, chars: 'x' });
        assert.match(gone, /write_stdin failed: session not found/);
        assert.match(await session.writeStdin({ sessionId: 9999 }), /Process exited with code 1\nOutput:\nwrite_stdin failed: session not found: 9999$/);
        // A poll of a process still running keeps its id.
        const slow = await session.exec({ cmd: 'sleep 0.6; echo slow-done', yieldTimeMs: 50 });
        const p1 = await session.writeStdin({ sessionId: slow.sessionId, yieldTimeMs: 50 });
        assert.match(p1, new RegExp(`Process running with session ID ${slow.sessionId}\n`));
        const p2 = await session.writeStdin({ sessionId: slow.sessionId, yieldTimeMs: 5000 });
        assert.match(p2, /Process exited with code 0\nOutput:\nslow-done\n$/);
    });

    test('maxOutputTokens truncates as the SDK clients do', async () => {
        const r = await session.exec({ cmd: 'seq 1 5000', maxOutputTokens: 20 });
        assert.equal(r.exitCode, 0);
        assert.ok(r.originalTokenCount > 20, String(r.originalTokenCount));
        assert.match(r.output, /^Total output lines: 5001\n\n1\n/);
        assert.match(r.output, /tokens truncated/);
        assert.ok(Buffer.byteLength(r.output) <= 80, r.output);
        const text = await session.execCommand({ cmd: 'seq 1 5000', maxOutputTokens: 20 });
        assert.match(text, /Original token count: \d+/);
    });

    test('tty: a PTY where the provider has one', async () => {
        assert.equal(session.supportsPty(), true);
        const r = await session.exec({ cmd: 'tty', tty: true });
        assert.equal(r.exitCode, 0);
        assert.match(r.output, /\/dev\/pts\//);
        // Ctrl-C on the terminal interrupts a running command.
        const long = await session.exec({ cmd: 'sleep 30', tty: true, yieldTimeMs: 200 });
        assert.equal(typeof long.sessionId, 'number');
        const t = Date.now();
        const out = await session.writeStdin({ sessionId: long.sessionId, chars: '\u0003', yieldTimeMs: 5000 });
        assert.match(out, /Process exited with code \d+/);
        assert.ok(Date.now() - t < 5000, 'interrupted before the yield time');
    });

    test('editor: create, update, move, delete; an escape is refused', async () => {
        const ed = session.createEditor();
        await ed.createFile({ type: 'create_file', path: 'ed/new.txt', diff: '+line one\n+line two\n' });
        assert.equal(Buffer.from(await session.readFile({ path: 'ed/new.txt' })).toString(), 'line one\nline two');
        await ed.updateFile({ type: 'update_file', path: 'ed/new.txt', diff: ' line one\n-line two\n+line 2\n' });
        assert.equal(Buffer.from(await session.readFile({ path: 'ed/new.txt' })).toString(), 'line one\nline 2');
        await ed.updateFile({ type: 'update_file', path: 'ed/new.txt', moveTo: 'ed/moved.txt', diff: ' line one\n-line 2\n+line two\n' });
        assert.equal(await session.pathExists('ed/new.txt'), false);
        assert.equal(Buffer.from(await session.readFile({ path: 'ed/moved.txt' })).toString(), 'line one\nline two');
        await ed.deleteFile({ type: 'delete_file', path: 'ed/moved.txt' });
        assert.equal(await session.pathExists('ed/moved.txt'), false);
        await assert.rejects(ed.createFile({ type: 'create_file', path: '../escape.txt', diff: '+x\n' }), /escapes the workspace/);
        await assert.rejects(ed.updateFile({ type: 'update_file', path: 'missing.txt', diff: '-a\n+b\n' }), /not found/i);
    });

    test('viewImage returns the image; a missing one is named', async () => {
        const img = await session.viewImage({ path: 'img.png' });
        assert.equal(img.type, 'image');
        assert.match(JSON.stringify(img), /image\/png/);
        await assert.rejects(session.viewImage({ path: 'nope.png' }), /Image file not found: nope\.png/);
    });

    test('materializeEntry and applyManifest add to a live session', async () => {
        await session.materializeEntry({ path: 'added/x.txt', entry: { type: 'file', content: 'x\n' } });
        assert.equal(Buffer.from(await session.readFile({ path: 'added/x.txt' })).toString(), 'x\n');
        assert.ok(session.state.manifest.entries['added/x.txt']);
        await session.applyManifest(new Manifest({ entries: { 'm2/y.txt': { type: 'file', content: 'y\n' } }, environment: { EXTRA: 'e1' } }));
        assert.equal(Buffer.from(await session.readFile({ path: 'm2/y.txt' })).toString(), 'y\n');
        assert.equal((await session.exec({ cmd: 'echo $EXTRA' })).stdout, 'e1\n');
    });

    test('persistWorkspace and hydrateWorkspace round-trip through sbx snapshots', async () => {
        await session.exec({ cmd: 'echo before > snap.txt' });
        const archive = await session.persistWorkspace();
        assert.ok(archive.byteLength > 0);
        await session.exec({ cmd: 'echo after > snap.txt; rm hello.txt' });
        await session.hydrateWorkspace(archive);
        assert.equal(Buffer.from(await session.readFile({ path: 'snap.txt' })).toString(), 'before\n');
        assert.equal(await session.pathExists('hello.txt'), true);
    });

    test('resolveExposedPort: a declared port has an endpoint, others are refused', async () => {
        const ep = await session.resolveExposedPort(8080);
        assert.equal(ep.port > 0, true);
        assert.equal(typeof ep.host, 'string');
        assert.deepEqual(session.state.exposedPorts['8080'], ep);
        await assert.rejects(session.resolveExposedPort(8081), /port_url: .*8081/);
        await assert.rejects(session.resolveExposedPort(0), /port/i);
    });

    test('state: no secret, no host path; resume needs the trusted manifest', async () => {
        const serialized = await client.serializeSessionState(session.state);
        const text = JSON.stringify(serialized);
        assert.ok(!text.includes(env.dir), text);
        assert.ok(!text.includes('hi-from-manifest'), text);
        assert.equal(serialized.sessionKey, session.state.sessionKey);
        assert.equal(serialized.provider, 'local');
        const state = await client.deserializeSessionState(JSON.parse(text));

        const other = env.client();
        await assert.rejects(other.resume(state), /trusted manifest/);
        await assert.rejects(other.resume(state, { clientOptions: { manifest: new Manifest({ entries: { 'hello.txt': { type: 'file', content: 'bye\n' } } }) } }), /manifest/i);
        const resumed = await other.resume(state, { clientOptions: { manifest } });
        assert.equal(Buffer.from(await resumed.readFile({ path: 'tree/a.txt' })).toString(), 'from host\n');
        assert.equal((await resumed.exec({ cmd: 'echo $GREETING' })).stdout, 'hi-from-manifest\n');

        for (const bad of [
            { ...serialized, sessionKey: '../../etc' },
            { ...serialized, manifestDigest: 'zz' },
            { ...serialized, sbxStateVersion: 99 },
            { ...serialized, provider: 'lo cal' },
            null,
        ])
            await assert.rejects(client.deserializeSessionState(bad), /sbx session state/);
    });

    test('hostile: escapes, symlinked sources, oversized manifests', async () => {
        await assert.rejects(session.readFile({ path: '../../etc/passwd' }), /escapes the workspace/);
        await assert.rejects(session.readFile({ path: '/etc/passwd' }));
        const evil = join(env.dir, 'evil');
        mkdirSync(evil);
        symlinkSync('/etc', join(evil, 'etc'));
        await assert.rejects(client.create({ manifest: new Manifest({ entries: { x: { type: 'local_dir', src: evil } } }) }), /symlink or special file/);
        symlinkSync('/etc/passwd', join(env.dir, 'pw'));
        await assert.rejects(client.create({ manifest: new Manifest({ entries: { x: { type: 'local_file', src: join(env.dir, 'pw') } } }) }), /symlink/);
        const small = env.client({ maxManifestBytes: 10 });
        await assert.rejects(small.create({ manifest: new Manifest({ entries: { x: { type: 'file', content: 'x'.repeat(11) } } }) }), /larger than the limit/);
        await assert.rejects(client.create({ manifest: new Manifest({ entries: { g: { type: 'git_repo', repo: 'a/b' } } }) }), /git_repo/);
        // local has no users capability: a declared user or runAs is refused at admission.
        await assert.rejects(client.create({ manifest: new Manifest({ users: [{ name: 'agent' }] }) }), /local.*users|users.*local/);
        await assert.rejects(env.client({ runAs: 'agent' }).create({ manifest: new Manifest() }), /users/);
    });

    test('hostile: a flooding command stays bounded', async () => {
        const r = await session.exec({ cmd: 'yes 0123456789abcdef | head -c 50000000; echo; echo tail-line' });
        assert.equal(r.exitCode, 0);
        // sbx caps one call's output (1 MiB by default) and says what it dropped.
        assert.ok(Buffer.byteLength(r.output) < 2 * 1024 * 1024, String(Buffer.byteLength(r.output)));
        assert.match(r.output, /^\[\.\.\.\d+ characters truncated from process output\.\.\.\]\n/);
        assert.match(r.output, /tail-line\n$/);
        const t = await session.exec({ cmd: 'yes | head -c 50000000', maxOutputTokens: 100 });
        assert.ok(Buffer.byteLength(t.output) <= 400, String(Buffer.byteLength(t.output)));
    });

    test('hostile: a process id of another session is not found there', async () => {
        const other = await client.create({ manifest: new Manifest() });
        try {
            const r = await session.exec({ cmd: 'sleep 5', yieldTimeMs: 50 });
            assert.equal(typeof r.sessionId, 'number');
            assert.match(await other.writeStdin({ sessionId: r.sessionId, chars: 'x' }), /session not found/);
            // And an sbx process id of one sandbox is refused in another by the server.
            const raw = await client.server.call('exec_command', { sandbox: session.state.sessionKey, cmd: 'sleep 5', yield_time_ms: 50 });
            assert.equal(raw.running, true);
            await assert.rejects(
                client.server.call('write_stdin', { sandbox: other.state.sessionKey, process_id: raw.process_id, chars: '' }),
                /not found|no process|unknown/i,
            );
        } finally {
            await other.delete();
        }
    });

    test('a dead sbx mcp child is replaced on the next call; sessions survive', async () => {
        const pid = client.server.pid;
        assert.equal(typeof pid, 'number');
        process.kill(pid, 'SIGKILL');
        await new Promise((r) => setTimeout(r, 200));
        // The call in flight fails or the next one reconnects: retry once.
        let r;
        try {
            r = await session.exec({ cmd: 'cat hello.txt' });
        } catch {
            r = await session.exec({ cmd: 'cat hello.txt' });
        }
        assert.equal(r.stdout, 'hello\n');
        assert.notEqual(client.server.pid, pid);
    });

    test('delete destroys the sandbox; resume then fails', async () => {
        const s = await client.create({ manifest: new Manifest() });
        const state = await client.deserializeSessionState(await client.serializeSessionState(s.state));
        assert.equal(await s.running(), true);
        await s.delete();
        assert.equal(await s.running(), false);
        await assert.rejects(client.resume(state, { clientOptions: { manifest: new Manifest() } }));
    });
});
