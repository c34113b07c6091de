// sdk_fidelity.mjs - the official OpenSandbox JavaScript SDK (npm
// `@alibaba-group/opensandbox`, pinned in package-lock.json) against
// tests/opensandbox/fake_opensandbox.py: proof that the fake speaks the
// protocol a client nobody here wrote expects.
// Environment: OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY, SBX_SDK_PROXY (1: use_server_proxy).
import { ConnectionConfig, Sandbox, SandboxManager } from '@alibaba-group/opensandbox'
import assert from 'node:assert/strict'

const step = (name) => console.log(`# ${name}`)
const connectionConfig = new ConnectionConfig({ useServerProxy: process.env.SBX_SDK_PROXY === '1' })

step('create with metadata and a deny-by-default network policy')
const sbx = await Sandbox.create({
  connectionConfig,
  image: 'ubuntu:22.04',
  metadata: { team: 'sbx', run: 'fidelity' },
  timeoutSeconds: 600,
  networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'pypi.org' }] },
  readyTimeoutSeconds: 30,
})
assert.ok(sbx.id)
const info = await sbx.getInfo()
assert.equal(info.status.state, 'Running')

step('list by metadata')
const manager = SandboxManager.create({ connectionConfig })
const listed = await manager.listSandboxInfos({ metadata: { run: 'fidelity' } })
assert.ok(listed.items.some((s) => s.id === sbx.id && s.metadata.team === 'sbx'), JSON.stringify(listed))

step('commands.run: stdout, stderr, exit code')
const ok = await sbx.commands.run('echo hello; echo oops >&2')
assert.equal(ok.exitCode, 0, JSON.stringify(ok))
assert.equal(ok.logs.stdout.map((m) => m.text).join(''), 'hello\n')
assert.equal(ok.logs.stderr.map((m) => m.text).join(''), 'oops\n')
const failed = await sbx.commands.run('echo partial; exit 3')
assert.equal(failed.exitCode, 3, JSON.stringify(failed))
assert.equal(failed.logs.stdout.map((m) => m.text).join(''), 'partial\n')

step('files.writeFiles / readBytes binary, with a mode')
const bytes = new Uint8Array(256 * 4)
for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256
await sbx.files.writeFiles([{ path: '/home/user/data/blob.bin', data: bytes, mode: 640 }])
const back = await sbx.files.readBytes('/home/user/data/blob.bin')
assert.deepEqual(Buffer.from(back), Buffer.from(bytes))
const part = await sbx.files.readBytes('/home/user/data/blob.bin', { range: 'bytes=256-511' })
assert.deepEqual(Buffer.from(part), Buffer.from(bytes.subarray(256, 512)))
const infos = await sbx.files.getFileInfo(['/home/user/data/blob.bin'])
const fi = infos['/home/user/data/blob.bin']
assert.equal(fi.size, bytes.length, JSON.stringify(infos))
assert.equal(fi.mode, 640, JSON.stringify(infos))

step('egress: read and patch the policy')
const pol = await sbx.getEgressPolicy()
assert.equal(pol.defaultAction, 'deny', JSON.stringify(pol))
assert.deepEqual(pol.egress, [{ action: 'allow', target: 'pypi.org' }])
await sbx.patchEgressRules([{ action: 'allow', target: '*.example.com' }])
const patched = await sbx.getEgressPolicy()
assert.deepEqual(patched.egress.map((r) => r.target).sort(), ['*.example.com', 'pypi.org'])
await sbx.deleteEgressRules(['pypi.org'])
const removed = await sbx.getEgressPolicy()
assert.deepEqual(removed.egress, [{ action: 'allow', target: '*.example.com' }])

step('renew, pause, resume')
await sbx.renew(1200)
await sbx.pause()
for (let i = 0; i < 50 && (await sbx.getInfo()).status.state !== 'Paused'; i++)
  await new Promise((r) => setTimeout(r, 50))
const resumed = await sbx.resume()
const again = await resumed.commands.run('echo back')
assert.equal(again.logs.stdout.map((m) => m.text).join(''), 'back\n')

step('kill')
await resumed.kill()
let gone = null
try {
  await manager.getSandboxInfo(sbx.id)
} catch (e) {
  gone = e
}
assert.ok(gone && gone.statusCode === 404, `after kill: ${gone}`)
await manager.close?.()
await sbx.close?.()
await resumed.close?.()
console.log('sdk fidelity: all steps passed')
