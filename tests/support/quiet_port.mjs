// quiet_port.mjs - a loopback port for a server a test starts inside a
// sandbox of a fake service: below the kernel's ephemeral range (where the
// fakes, the daemons and every outgoing connection take theirs) and free
// when chosen (it binds). The same choice as quiet_port.h.
import { readFileSync } from 'node:fs'
import net from 'node:net'

const bindable = (port) => new Promise((resolve) => {
  const s = net.createServer()
  s.once('error', () => resolve(false))
  s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)))
})

export async function quietPort () {
  let low = 32768
  try { low = parseInt(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'), 10) || low } catch {}
  const span = low - 10000
  for (let i = 0; i < span; i++) {
    const port = 10000 + ((process.pid + i) % span)
    if (await bindable(port)) return port
  }
  throw new Error('no free loopback port below the ephemeral range')
}
