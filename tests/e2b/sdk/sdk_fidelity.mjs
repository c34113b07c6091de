// sdk_fidelity.mjs - the official E2B JavaScript SDK (npm `e2b`, pinned in
// package-lock.json) against tests/e2b/fake_e2b.py: proof that the fake
// speaks the protocol a client nobody here wrote expects.
// Environment: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN.
import { Sandbox, CommandExitError } from 'e2b'
import assert from 'node:assert/strict'
import { quietPort } from './quiet_port.mjs'

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

step('commands.run background + connect + sendStdin + list + kill')
let seen = ''
const cat = await sbx.commands.run('cat; echo after-eof', { background: true, stdin: true })
assert.ok(cat.pid > 0)
const procs = await sbx.commands.list()
assert.ok(procs.some((p) => p.pid === cat.pid && p.cmd === '/bin/bash'), JSON.stringify(procs))
const attached = await sbx.commands.connect(cat.pid, { onStdout: (d) => { seen += d } })
await sbx.commands.sendStdin(cat.pid, 'through-connect\n')
for (let i = 0; i < 100 && !seen.includes('through-connect'); i++) await new Promise((r) => setTimeout(r, 50))
assert.ok(seen.includes('through-connect\n'), `connect saw ${JSON.stringify(seen)}`)
await sbx.commands.closeStdin(cat.pid)
const catDone = await attached.wait()
assert.equal(catDone.exitCode, 0)
assert.ok(catDone.stdout.includes('after-eof'), JSON.stringify(catDone.stdout))
const sleeper = await sbx.commands.run('sleep 30', { background: true })
assert.equal(await sbx.commands.kill(sleeper.pid), true)
assert.equal(await sbx.commands.kill(999999), false)
let listedAfter = true
for (let i = 0; i < 40 && listedAfter; i++) {
  listedAfter = (await sbx.commands.list()).some((p) => p.pid === sleeper.pid)
  if (listedAfter) await new Promise((r) => setTimeout(r, 50))
}
assert.ok(!listedAfter, 'a killed command stays listed')

step('pty.create / sendInput / resize / kill')
let term = ''
const dec = new TextDecoder()
const pty = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { term += dec.decode(d) } })
assert.ok(pty.pid > 0)
const enc = new TextEncoder()
await sbx.pty.sendInput(pty.pid, enc.encode('stty size; tty; echo TERM=$TERM\n'))
const shown = (...w) => w.every((x) => term.includes(x))
for (let i = 0; i < 100 && !shown('30 100', '/dev/pts/'); i++) await new Promise((r) => setTimeout(r, 50))
assert.ok(term.includes('30 100'), `pty output ${JSON.stringify(term)}`)
assert.ok(term.includes('/dev/pts/'), term)
await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 })
await sbx.pty.sendInput(pty.pid, enc.encode('stty size\n'))
for (let i = 0; i < 100 && !term.includes('40 120'); i++) await new Promise((r) => setTimeout(r, 50))
assert.ok(term.includes('40 120'), `after resize ${JSON.stringify(term)}`)
assert.equal(await sbx.pty.kill(pty.pid), true)
const ptyEnd = await pty.wait().then(() => null, (e) => e)
assert.ok(ptyEnd instanceof CommandExitError, `killed pty ended with ${ptyEnd}`)

step('files.makeDir / getInfo / rename / list / remove')
assert.equal(await sbx.files.makeDir('/home/user/tree/a/b'), true)
assert.equal(await sbx.files.makeDir('/home/user/tree/a/b'), false)
await sbx.files.write('/home/user/tree/a/f.txt', 'twelve bytes')
const fi = await sbx.files.getInfo('/home/user/tree/a/f.txt')
assert.equal(fi.type, 'file')
assert.equal(fi.size, 12)
assert.equal(fi.name, 'f.txt')
assert.ok(fi.modifiedTime instanceof Date && !isNaN(fi.modifiedTime), String(fi.modifiedTime))
const di = await sbx.files.getInfo('/home/user/tree/a/b')
assert.equal(di.type, 'dir')
const moved = await sbx.files.rename('/home/user/tree/a/f.txt', '/home/user/tree/g.txt')
assert.equal(moved.path, '/home/user/tree/g.txt')
const tree = await sbx.files.list('/home/user/tree')
assert.deepEqual(tree.map((e) => `${e.name}:${e.type}`).sort(), ['a:dir', 'g.txt:file'])
const deep = await sbx.files.list('/home/user/tree', { depth: 2 })
assert.ok(deep.some((e) => e.path === '/home/user/tree/a/b'), JSON.stringify(deep))
await sbx.files.remove('/home/user/tree')
assert.equal(await sbx.files.exists('/home/user/tree'), false)

step('getHost: a port served in the sandbox through the proxy form')
const port = await quietPort()
const server = await sbx.commands.run(`cd /home/user && echo served > hello.txt && exec python3 -m http.server ${port} --bind 127.0.0.1`, { background: true })
const host = sbx.getHost(port)
assert.equal(host, `${port}-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`)
// The domain does not resolve here: ask the fake (the service's proxy)
// with the Host the SDK gave.
const http = await import('node:http')
const api = new URL(process.env.E2B_API_URL)
let body = ''
// the server is starting (up to 30 s: python3 under load)
for (const until = Date.now() + 30000; Date.now() < until && !body.includes('served');) {
  body = await new Promise((resolve) => {
    const req = http.request({ host: api.hostname, port: api.port, path: '/hello.txt', headers: { Host: host } },
      (res) => { let b = ''; res.on('data', (d) => { b += d }); res.on('end', () => resolve(res.statusCode === 200 ? b : '')) })
    req.on('error', () => resolve(''))
    req.end()
  })
  if (!body.includes('served')) await new Promise((r) => setTimeout(r, 100))
}
assert.equal(body, 'served\n')
await server.kill()

step('setTimeout')
await sbx.setTimeout(120_000)
const info = await sbx.getInfo()
assert.ok(new Date(info.endAt).getTime() - Date.now() > 90_000, `endAt ${info.endAt}`)

step('connect')
const again = await Sandbox.connect(sbx.sandboxId)
const wc = await again.commands.run('wc -c < data/blob.bin')
assert.equal(wc.stdout.trim(), String(bytes.length))

step('betaPause + connect (the fake freezes the processes, connect resumes them)')
await sbx.commands.run('while :; do echo t >> ticks; sleep 0.05; done', { background: true })
await new Promise((r) => setTimeout(r, 300))
await sbx.betaPause()
assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused')
const resumed = await Sandbox.connect(sbx.sandboxId)
assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
const t1 = Number((await resumed.commands.run('wc -c < ticks')).stdout.trim())
await new Promise((r) => setTimeout(r, 300))
const t2 = Number((await resumed.commands.run('wc -c < ticks')).stdout.trim())
assert.ok(t2 > t1, `the loop did not continue after resume: ${t1} then ${t2}`)

step('createSnapshot, create from it, listSnapshots, deleteSnapshot')
await resumed.commands.run('mkdir -p snap && echo kept > snap/f && chmod 0640 snap/f && ln -s f snap/l')
const snap = await resumed.createSnapshot({ name: 'fidelity-snap' })
assert.ok(snap.snapshotId.includes('fidelity-snap'), JSON.stringify(snap))
const fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
assert.notEqual(fromSnap.sandboxId, sbx.sandboxId)
const copied = await fromSnap.commands.run('cat snap/f; stat -c %a snap/f; readlink snap/l')
assert.equal(copied.stdout, 'kept\n640\nf\n')
const mine = await resumed.listSnapshots().nextItems()
assert.ok(mine.some((x) => x.snapshotId === snap.snapshotId), JSON.stringify(mine))
const byName = await Sandbox.listSnapshots({ name: 'fidelity-snap' }).nextItems()
assert.equal(byName.length, 1, JSON.stringify(byName))
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
assert.equal((await Sandbox.listSnapshots().nextItems()).length, 0)
await fromSnap.kill()

step('kill')
await sbx.kill()
const gone = await Sandbox.connect(sbx.sandboxId).then(() => null, (e) => e)
assert.ok(gone, 'connect after kill succeeded')
console.log('ok: the E2B SDK accepted the fake')
