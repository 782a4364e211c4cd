// Serves the adapter scenarios named by its argument (a JSON list of names, from `scenarios` or
// `leaving`) with the BUILT fetch adapter, in Deno or Bun: one listener per scenario on
// 127.0.0.1, then prints {"ports":[…]} on one line. Exits when stdin closes, so it never outlives
// the test process.

import { bunPeer, denoPeer, withRateLimit } from '../../../dist/fetch.js'
import * as lib from '../../../dist/index.js'
import { leaving, scenarios } from './scenarios.ts'

const deno = globalThis.Deno
const names = JSON.parse((deno ? deno.args : globalThis.Bun.argv.slice(2))[0])
const table = [...scenarios, ...leaving]

const ports = names.map((name) => {
  const scenario = table.find((s) => s.name === name)
  // The handler's runs for this listener so far, this one included.
  let handled = 0
  const handler = () =>
    new Response('ok', { headers: { 'X-Handler': 'yes', 'X-Handled': String(++handled) } })
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
