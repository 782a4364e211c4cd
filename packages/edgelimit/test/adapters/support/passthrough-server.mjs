// Serves `withRateLimit(() => fetch(upstream))` (the BUILT fetch adapter) in Deno or Bun on
// 127.0.0.1, the upstream's URL as the first argument; prints {"port":…} once listening. Exits
// when stdin closes, so it never outlives the test process.

import { bunPeer, denoPeer, withRateLimit } from '../../../dist/fetch.js'
import * as lib from '../../../dist/index.js'

const deno = globalThis.Deno
const upstream = deno ? deno.args[0] : process.argv[2]
const limiter = lib.createLimiter({
  rules: [{ name: 'edge', algorithm: lib.fixedWindow({ limit: 10, window: '1h' }) }],
})
const fetchHandler = withRateLimit(() => fetch(upstream), { limiter, peer: deno ? denoPeer : bunPeer })
const port = deno
  ? deno.serve({ port: 0, hostname: '127.0.0.1', onListen() {} }, fetchHandler).addr.port
  : globalThis.Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: fetchHandler }).port
console.log(JSON.stringify({ port }))

const stdin = deno ? deno.stdin.readable : globalThis.Bun.stdin.stream()
for await (const _ of stdin) {
  // Nothing is sent: the loop ends when the test process closes the pipe.
}
if (deno) deno.exit(0)
else process.exit(0)
