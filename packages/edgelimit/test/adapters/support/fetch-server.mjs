// Serves every adapter scenario with the BUILT fetch adapter, in Deno or Bun: one listener per
// scenario on 127.0.0.1, then prints {"ports":[…]} on one line. Exits when stdin closes, so it
// never outlives the test process.

import { bunPeer, denoPeer, withRateLimit } from '../../../dist/fetch.js'
import * as lib from '../../../dist/index.js'
import { scenarios } from './scenarios.ts'

const handler = () => new Response('ok', { headers: { 'X-Handler': 'yes' } })
const deno = globalThis.Deno

const ports = scenarios.map((scenario) => {
  const fetch = withRateLimit(handler, {
    ...scenario.options(lib, undefined),
    peer: deno ? denoPeer : bunPeer,
  })
  if (deno) return deno.serve({ port: 0, hostname: '127.0.0.1', onListen() {} }, fetch).addr.port
  return globalThis.Bun.serve({ port: 0, hostname: '127.0.0.1', fetch }).port
})

console.log(JSON.stringify({ ports }))

const stdin = deno ? deno.stdin.readable : globalThis.Bun.stdin.stream()
for await (const _ of stdin) {
  // Nothing is sent: the loop ends when the test process closes the pipe.
}
if (deno) deno.exit(0)
else process.exit(0)
