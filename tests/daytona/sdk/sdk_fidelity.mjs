// sdk_fidelity.mjs - the official Daytona TypeScript SDK (@daytonaio/sdk,
// pinned in package-lock.json) against fake_daytona.py: create, run a
// command and read its output and exit code, split stdout/stderr through
// a session, an asynchronous session command and its logs, write and
// read a binary file, list, inspect, create, move and delete files, a
// port's preview link reaching a server in the sandbox with its token,
// list by label, get by name, delete. Every step must behave as the SDK
// expects of the real service.
import { Daytona } from '@daytonaio/sdk'
import assert from 'node:assert/strict'
import { quietPort } from './quiet_port.mjs'

const daytona = new Daytona({
  apiKey: process.env.DAYTONA_API_KEY,
  apiUrl: process.env.DAYTONA_API_URL,
  target: 'us',
})
const step = (s) => console.log(`sdk: ${s}`)

step('create')
const sb = await daytona.create({
  name: 'sdk-fidelity',
  labels: { suite: 'sdk-fidelity' },
  autoStopInterval: 5,
  networkBlockAll: true,
}, { timeout: 30 })
assert.equal(sb.state, 'started', `state after create: ${sb.state}`)
assert.equal(sb.labels.suite, 'sdk-fidelity')
assert.ok(sb.id)

step('executeCommand: output and exit code')
const r = await sb.process.executeCommand('printf hello; exit 3')
assert.equal(r.exitCode, 3)
assert.equal(r.result, 'hello')
const ok = await sb.process.executeCommand('echo "$FOO"', undefined, { FOO: 'bar' })
assert.equal(ok.exitCode, 0)
assert.equal(ok.result.trim(), 'bar')

step('session: stdout and stderr apart')
await sb.process.createSession('fidelity')
const c = await sb.process.executeSessionCommand('fidelity', { command: 'echo out; echo err >&2; exit 4' })
assert.equal(c.exitCode, 4)
assert.equal(c.stdout, 'out\n')
assert.equal(c.stderr, 'err\n')
const cmd = await sb.process.getSessionCommand('fidelity', c.cmdId)
assert.equal(cmd.exitCode, 4)
await sb.process.deleteSession('fidelity')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

step('session: an asynchronous command, its exit code and logs')
await sb.process.createSession('async')
const started = await sb.process.executeSessionCommand('async', {
  command: 'echo a-out; echo a-err >&2; sleep 0.3; exit 5',
  runAsync: true,
})
assert.ok(started.cmdId, 'no command id')
assert.equal(started.exitCode ?? undefined, undefined, 'an async command has no exit code yet')
let ended
for (let i = 0; i < 100; i++) {
  ended = await sb.process.getSessionCommand('async', started.cmdId)
  if (ended.exitCode !== undefined && ended.exitCode !== null) break
  await sleep(100)
}
assert.equal(ended.exitCode, 5)
const logs = await sb.process.getSessionCommandLogs('async', started.cmdId)
assert.equal(logs.stdout, 'a-out\n')
assert.equal(logs.stderr, 'a-err\n')
// the follow form: a WebSocket, stdout and stderr demultiplexed as they come
const streamed = await sb.process.executeSessionCommand('async', {
  command: 'for i in 1 2 3; do echo so$i; echo se$i >&2; sleep 0.1; done',
  runAsync: true,
})
let sOut = ''
let sErr = ''
await sb.process.getSessionCommandLogs('async', streamed.cmdId, (t) => { sOut += t }, (t) => { sErr += t })
assert.equal(sOut, 'so1\nso2\nso3\n')
assert.equal(sErr, 'se1\nse2\nse3\n')
const sessions = await sb.process.listSessions()
assert.ok(sessions.some((x) => x.sessionId === 'async'), 'listSessions misses the session')
const session = await sb.process.getSession('async')
assert.equal(session.commands.length, 2)
await sb.process.deleteSession('async')
await assert.rejects(sb.process.getSession('async'), /not found/i)

step('fs: list, details, folder, move, delete')
await sb.fs.createFolder('tree/sub', '700')
await sb.fs.uploadFile(Buffer.from('12345'), 'tree/f.txt')
await sb.process.executeCommand('ln -s /etc tree/link')
const entries = await sb.fs.listFiles('tree')
const listedByName = Object.fromEntries(entries.map((e) => [e.name, e]))
assert.deepEqual(Object.keys(listedByName).sort(), ['f.txt', 'link', 'sub'])
assert.equal(listedByName.sub.isDir, true)
assert.equal(listedByName["f.txt"].size, 5)
assert.equal(listedByName["f.txt"].isDir, false)
assert.ok(listedByName.link.mode.startsWith('L'), `a listed symlink is itself: ${listedByName.link.mode}`)
assert.ok(!Number.isNaN(Date.parse(listedByName["f.txt"].modifiedAt)), 'modifiedAt is RFC 3339')
const sub = await sb.fs.getFileDetails('tree/sub')
assert.equal(sub.isDir, true)
assert.equal(sub.permissions, '0700')
await sb.fs.moveFiles('tree/f.txt', 'tree/g.txt')
assert.equal((await sb.fs.getFileDetails('tree/g.txt')).size, 5)
await assert.rejects(sb.fs.getFileDetails('tree/f.txt'))
await sb.fs.deleteFile('tree', true)
await assert.rejects(sb.fs.listFiles('tree'))

step('preview link: url and token reach a server in the sandbox')
const port = await quietPort()
await sb.process.createSession('web')
await sb.process.executeSessionCommand('web', {
  command: `mkdir -p site && echo previewed > site/index.html && cd site && exec python3 -m http.server ${port} --bind 127.0.0.1`,
  runAsync: true,
})
const link = await sb.getPreviewLink(port)
assert.ok(link.url.startsWith('http'), link.url)
assert.ok(link.token, 'no preview token')
let page
// the server is starting (up to 30 s: python3 under load)
for (const until = Date.now() + 30000; Date.now() < until;) {
  page = await fetch(`${link.url}/index.html`, { headers: { 'x-daytona-preview-token': link.token } })
  if (page.status === 200) break
  await sleep(100)
}
assert.equal(page.status, 200)
assert.equal((await page.text()).trim(), 'previewed')
const refused = await fetch(`${link.url}/index.html`)
assert.equal(refused.status, 401, 'a private sandbox\'s preview wants the token')
await sb.process.deleteSession('web')

step('pty: create, input, resize, info, list, exit code, kill')
let screen = ''
const pty = await sb.process.createPty({
  id: 'term',
  cols: 100,
  rows: 30,
  envs: { GREETING: 'hi-from-env' },
  onData: (d) => { screen += new TextDecoder().decode(d) },
})
const waitFor = async (what) => {
  for (let i = 0; i < 100 && !screen.includes(what); i++) await sleep(50)
  assert.ok(screen.includes(what), `the terminal never showed ${what}: ${JSON.stringify(screen)}`)
}
await pty.sendInput('stty size; tty; echo $GREETING\n')
await waitFor('30 100')
await waitFor('/dev/pts/')
await waitFor('hi-from-env')
// resize only once the shell has the trap (the echo of the line is not enough)
await pty.sendInput("trap 'echo winch; stty size' WINCH; echo trap-$((20+3))\n")
await waitFor('trap-23')
await pty.resize(120, 40)
await waitFor('40 120')
const ptyInfo = await sb.process.getPtySessionInfo('term')
assert.equal(ptyInfo.cols, 120)
assert.equal(ptyInfo.rows, 40)
assert.equal(ptyInfo.active, true)
assert.ok((await sb.process.listPtySessions()).some((x) => x.id === 'term'))
await pty.sendInput('sleep 30\n')
await sleep(200)
await pty.sendInput('\x03')  // ^C: SIGINT to the foreground job
await pty.sendInput('echo after-ctrl-c\n')
await waitFor('after-ctrl-c')
await pty.sendInput('exit 7\n')
const exit = await pty.wait()
assert.equal(exit.exitCode, 7)
await sb.process.killPtySession('term')
await assert.rejects(sb.process.getPtySessionInfo('term'), /not found/i)
const pty2 = await sb.process.createPty({ id: 'term2', onData: () => {} })
await pty2.kill()
await assert.rejects(sb.process.getPtySessionInfo('term2'), /not found/i)

step('binary file: upload and download')
const data = Buffer.alloc(300 * 1024)
for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 8)) & 0xff
await sb.fs.createFolder('data', '755')
await sb.fs.uploadFile(data, 'data/blob.bin')
const back = await sb.fs.downloadFile('data/blob.bin')
assert.ok(Buffer.compare(Buffer.from(back), data) === 0, 'downloaded bytes differ')
const info = await sb.fs.getFileDetails('data/blob.bin')
assert.equal(info.size, data.length)
const shell = await sb.process.executeCommand('wc -c < data/blob.bin')
assert.equal(shell.result.trim(), String(data.length))

step('list by label and get by name')
const listed = async (labels) => {
  const ids = []
  for await (const s of daytona.list({ labels })) ids.push(s.id)
  return ids
}
assert.deepEqual(await listed({ suite: 'sdk-fidelity' }), [sb.id])
assert.deepEqual(await listed({ suite: 'no-such-suite' }), [])
const byName = await daytona.get('sdk-fidelity')
assert.equal(byName.id, sb.id)

step('delete')
await sb.delete()
// Deletion is asynchronous: the sandbox is destroying, then gone.
let gone = false
for (let i = 0; i < 100 && !gone; i++) {
  try {
    const s = await daytona.get(sb.id)
    assert.ok(['destroying', 'destroyed'].includes(s.state), `state after delete: ${s.state}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  } catch (e) {
    assert.match(String(e.message), /not found/i)
    gone = true
  }
}
assert.ok(gone, 'the sandbox is still there 10 s after its deletion')
step('all passed')
