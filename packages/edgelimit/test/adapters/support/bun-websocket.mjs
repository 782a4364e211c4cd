// Bun's WebSocket upgrade behind the BUILT fetch adapter, as Bun documents it: the handler calls
// `server.upgrade(request)` and returns nothing. Three clients connect (limit 2 per address): two
// are upgraded and echo, the third gets the 429. Prints {"echoes","denied","errors"} and exits.
// argv: <window> (the fixed window's length: one the run cannot cross the end of, as the limiter
// counts on the system clock and the third client would pass in the next window)

import { bunPeer, withRateLimit } from '../../../dist/fetch.js'
import { createLimiter, fixedWindow } from '../../../dist/index.js'

const errors = []
const window = process.argv[2]
const limiter = createLimiter({ rules: [{ name: 'ws', algorithm: fixedWindow({ limit: 2, window }) }] })
const server = globalThis.Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: withRateLimit(
    (request, server) => {
      if (server.upgrade(request)) return
      return new Response('not a websocket', { status: 400 })
    },
    { limiter, peer: bunPeer },
  ),
  websocket: {
    message(ws, message) {
      ws.send(`echo:${message}`)
    },
  },
  error(error) {
    errors.push(String(error))
    return new Response('error', { status: 500 })
  },
})

const url = `ws://127.0.0.1:${server.port}/`
const echo = () =>
  new Promise((resolve) => {
    const ws = new WebSocket(url)
    ws.onopen = () => ws.send('hi')
    ws.onmessage = (event) => {
      ws.close()
      resolve(event.data)
    }
    ws.onerror = () => resolve('error')
  })
const echoes = [await echo(), await echo()]
const denied = await fetch(`http://127.0.0.1:${server.port}/`, {
  headers: {
    upgrade: 'websocket',
    connection: 'upgrade',
    'sec-websocket-version': '13',
    'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
  },
})
await new Promise((r) => setTimeout(r, 50))
console.log(JSON.stringify({ echoes, denied: denied.status, errors }))
server.stop(true)
process.exit(0)
