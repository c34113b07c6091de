// sdk_fidelity.mjs - the official Daytona TypeScript SDK (@daytonaio/sdk,
// pinned in package-lock.json) against fake_daytona.py: create, run a
// command and read its output and exit code, split stdout/stderr through
// a session, write and read a binary file, list by label, get by name,
// delete. Every step must behave as the SDK expects of the real service.
import { Daytona } from '@daytonaio/sdk'
import assert from 'node:assert/strict'

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
