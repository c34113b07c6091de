// sdk_fidelity.mjs - the official E2B JavaScript SDK (npm `e2b`, pinned in
// package-lock.json) against tests/e2b/fake_e2b.py: proof that the fake
// speaks the protocol a client nobody here wrote expects.
// Environment: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN.
import { Sandbox, CommandExitError } from 'e2b'
import assert from 'node:assert/strict'

const step = (name) => console.log(`# ${name}`)

step('create with metadata')
const sbx = await Sandbox.create('base', { metadata: { team: 'sbx', run: 'fidelity' }, timeoutMs: 60_000 })
assert.ok(sbx.sandboxId)

step('list by metadata')
const pages = Sandbox.list({ query: { metadata: { run: 'fidelity' } } })
const listed = await pages.nextItems()
assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId && s.metadata.team === 'sbx'),
  JSON.stringify(listed))

step('commands.run: stdout, stderr, exit code')
const ok = await sbx.commands.run('echo hello; echo oops >&2')
assert.equal(ok.exitCode, 0)
assert.equal(ok.stdout, 'hello\n')
assert.equal(ok.stderr, 'oops\n')
let failed = null
try {
  await sbx.commands.run('echo partial; exit 3')
} catch (e) {
  failed = e
}
assert.ok(failed instanceof CommandExitError, String(failed))
assert.equal(failed.exitCode, 3)
assert.equal(failed.stdout, 'partial\n')

step('background command killed')
const bg = await sbx.commands.run('sleep 30', { background: true })
assert.ok(bg.pid > 0)
assert.equal(await sbx.commands.kill(bg.pid), true)
const ended = await bg.wait().then(() => null, (e) => e)
assert.ok(ended instanceof CommandExitError, `killed command ended with ${ended}`)

step('files.write / files.read binary')
const bytes = new Uint8Array(256 * 4)
for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256
await sbx.files.write('/home/user/data/blob.bin', bytes.buffer)
const back = await sbx.files.read('/home/user/data/blob.bin', { format: 'bytes' })
assert.deepEqual(Buffer.from(back), Buffer.from(bytes))
const text = await sbx.files.read('/home/user/data/blob.bin', { format: 'text' })
assert.equal(typeof text, 'string')

step('files.list')
const entries = await sbx.files.list('/home/user/data')
assert.ok(entries.some((e) => e.name === 'blob.bin' && e.type === 'file'), JSON.stringify(entries))
assert.equal(await sbx.files.exists('/home/user/data/nothing'), false)

step('setTimeout')
await sbx.setTimeout(120_000)
const info = await sbx.getInfo()
assert.ok(new Date(info.endAt).getTime() - Date.now() > 90_000, `endAt ${info.endAt}`)

step('connect')
const again = await Sandbox.connect(sbx.sandboxId)
const wc = await again.commands.run('wc -c < data/blob.bin')
assert.equal(wc.stdout.trim(), String(bytes.length))

step('kill')
await sbx.kill()
const gone = await Sandbox.connect(sbx.sandboxId).then(() => null, (e) => e)
assert.ok(gone, 'connect after kill succeeded')
console.log('ok: the E2B SDK accepted the fake')
