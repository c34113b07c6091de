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

step('background command: status, logs read in full and from the cursor')
const bg = await sbx.commands.run('echo one; echo two >&2; sleep 0.3; printf three', { background: true })
assert.ok(bg.id, JSON.stringify(bg))
let status = await sbx.commands.getCommandStatus(bg.id)
assert.equal(status.id, bg.id, JSON.stringify(status))
for (let i = 0; i < 100 && status.running; i++) {
  await new Promise((r) => setTimeout(r, 50))
  status = await sbx.commands.getCommandStatus(bg.id)
}
assert.equal(status.running, false, JSON.stringify(status))
assert.equal(status.exitCode, 0, JSON.stringify(status))
assert.ok(status.finishedAt instanceof Date, JSON.stringify(status))
const logs = await sbx.commands.getBackgroundCommandLogs(bg.id)
// stdout and stderr share execd's one output file
assert.equal(logs.content.split('\n').sort().join('|'), 'one|three|two', JSON.stringify(logs))
assert.equal(logs.cursor, Buffer.byteLength(logs.content), JSON.stringify(logs))
const tail = await sbx.commands.getBackgroundCommandLogs(bg.id, 4)
assert.equal(tail.content, logs.content.slice(4), JSON.stringify(tail))
const none = await sbx.commands.getBackgroundCommandLogs(bg.id, logs.cursor)
assert.equal(none.content, '')
assert.equal(none.cursor, logs.cursor)

step('interrupt a background command')
const long = await sbx.commands.run('sleep 30', { background: true })
await sbx.commands.interrupt(long.id)
let ls = await sbx.commands.getCommandStatus(long.id)
for (let i = 0; i < 100 && ls.running; i++) {
  await new Promise((r) => setTimeout(r, 50))
  ls = await sbx.commands.getCommandStatus(long.id)
}
assert.equal(ls.running, false, JSON.stringify(ls))
assert.equal(ls.exitCode, -1, JSON.stringify(ls))
assert.match(ls.error ?? '', /signal: terminated/, JSON.stringify(ls))
await assert.rejects(sbx.commands.interrupt(long.id)) // not running any more

step('files: mkdir, list, info, move, search, delete')
await sbx.files.createDirectories([{ path: '/home/user/tree/sub', mode: 750 }])
await sbx.files.writeFiles([{ path: '/home/user/tree/a.txt', data: 'aaa' },
                            { path: '/home/user/tree/sub/b.txt', data: 'bb' }])
const top = await sbx.files.listDirectory({ path: '/home/user/tree' })
assert.deepEqual(top.map((f) => [f.path, f.type]),
  [['/home/user/tree/a.txt', 'file'], ['/home/user/tree/sub', 'directory']], JSON.stringify(top))
assert.equal(top[1].mode, 750, JSON.stringify(top))
assert.ok(top[0].modifiedAt instanceof Date)
const deep = await sbx.files.listDirectory({ path: '/home/user/tree', depth: 2 })
assert.deepEqual(deep.map((f) => f.path),
  ['/home/user/tree/a.txt', '/home/user/tree/sub', '/home/user/tree/sub/b.txt'])
await sbx.files.moveFiles([{ src: '/home/user/tree/a.txt', dest: '/home/user/tree/sub/c.txt' }])
await assert.rejects(sbx.files.moveFiles([{ src: '/home/user/tree/sub/b.txt',
                                            dest: '/home/user/tree/sub/c.txt' }]))
const found = await sbx.files.search({ path: '/home/user/tree', pattern: '*.txt' })
assert.deepEqual(found.map((f) => f.path).sort(),
  ['/home/user/tree/sub/b.txt', '/home/user/tree/sub/c.txt'], JSON.stringify(found))
const moved = await sbx.files.getFileInfo(['/home/user/tree/sub/c.txt'])
assert.equal(moved['/home/user/tree/sub/c.txt'].size, 3)
await sbx.files.deleteFiles(['/home/user/tree/sub/c.txt'])
await assert.rejects(sbx.files.getFileInfo(['/home/user/tree/sub/c.txt']))
await sbx.files.deleteDirectories(['/home/user/tree'])
await assert.rejects(sbx.files.listDirectory({ path: '/home/user/tree' }))

step('endpoint of a port a server in the sandbox listens on')
const port = 30000 + Math.floor(Math.random() * 20000)
await sbx.files.writeFiles([{ path: '/home/user/www/hi.txt', data: 'hello through the endpoint' }])
const server = await sbx.commands.run(`exec python3 -m http.server ${port} --bind 127.0.0.1`,
                                      { background: true, workingDirectory: '/home/user/www' })
const ep = await sbx.getEndpoint(port)
const url = await sbx.getEndpointUrl(port)
assert.ok(url.endsWith(ep.endpoint), url)
let body = ''
for (let i = 0; i < 50; i++) {
  try {
    const r = await fetch(`${url}/hi.txt`, { headers: ep.headers ?? {} })
    if (r.status === 200) { body = await r.text(); break }
  } catch (e) { /* not listening yet */ }
  await new Promise((r) => setTimeout(r, 100))
}
assert.equal(body, 'hello through the endpoint')
await sbx.commands.interrupt(server.id)

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

step('renew, pause: Pausing then Paused, processes frozen, ops held until resume')
await sbx.renew(1200)
const ticker = await sbx.commands.run(
  'while :; do date +%s%N >> /home/user/ticks; sleep 0.05; done', { background: true })
await new Promise((r) => setTimeout(r, 300))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
await sbx.pause()
const seen = []
for (let i = 0; i < 100; i++) {
  const st = (await sbx.getInfo()).status.state
  if (seen[seen.length - 1] !== st) seen.push(st)
  if (st === 'Paused') break
  await sleep(10)
}
assert.equal(seen[seen.length - 1], 'Paused', JSON.stringify(seen))
assert.ok(seen.every((st) => st === 'Pausing' || st === 'Paused'), JSON.stringify(seen))
// pause of a paused sandbox conflicts with its state (409)
await assert.rejects(sbx.pause(), (e) => e.statusCode === 409 || /409/.test(String(e)))
// a command sent to the paused sandbox is not answered until it runs again
let held = null
const heldRun = sbx.commands.run('echo held').then((r) => { held = r })
await sleep(600)
assert.equal(held, null, 'a paused sandbox answered a command')
const pausedInfo = await sbx.getInfo()
assert.equal(pausedInfo.status.state, 'Paused')

step('resume: Resuming then Running, the same processes continue, the held command completes')
const resumed = await sbx.resume()
assert.equal((await resumed.getInfo()).status.state, 'Running')
await heldRun
assert.equal(held.logs.stdout.map((m) => m.text).join(''), 'held\n', JSON.stringify(held))
await assert.rejects(manager.resumeSandbox(sbx.id),
  (e) => e.statusCode === 409 || /409/.test(String(e)))
const tstatus = await resumed.commands.getCommandStatus(ticker.id)
assert.equal(tstatus.running, true, JSON.stringify(tstatus))
await sleep(300)
const ticks = (await resumed.files.readFile('/home/user/ticks')).trim().split('\n').map(BigInt)
let gap = 0n
for (let i = 1; i < ticks.length; i++) if (ticks[i] - ticks[i - 1] > gap) gap = ticks[i] - ticks[i - 1]
// frozen across the pause (over 600 ms without a tick), ticking again after it
assert.ok(gap >= 550000000n, `largest gap between ticks ${gap} ns`)
const lastTick = ticks[ticks.length - 1]
assert.ok(Number(BigInt(Date.now()) * 1000000n - lastTick) < 300e6, 'no tick since the resume')
const again = await resumed.commands.run('echo back')
assert.equal(again.logs.stdout.map((m) => m.text).join(''), 'back\n')

step('a paused sandbox can be deleted')
await resumed.pause()
for (let i = 0; i < 50 && (await resumed.getInfo()).status.state !== 'Paused'; i++) await sleep(20)
assert.equal((await resumed.getInfo()).status.state, 'Paused')

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
