// Serves the adapter scenarios named by its first argument (a JSON list of names, from `scenarios`
// or `leaving`) with the BUILT fetch adapter, or the built Hono middleware when the second
// argument is `hono`, in Deno or Bun: one listener per scenario on 127.0.0.1, then prints
// {"ports":[…]} on one line. Exits when stdin closes, so it never outlives the test process.

import { bunPeer, denoPeer, withRateLimit } from '../../../dist/fetch.js'
import * as lib from '../../../dist/index.js'
import { leaving, scenarios } from './scenarios.ts'

const deno = globalThis.Deno
const [list, adapter] = deno ? deno.args : globalThis.Bun.argv.slice(2)
const names = JSON.parse(list)
const table = [...scenarios, ...leaving]
const hono =
  adapter === 'hono'
    ? {
        ...(await import('hono')),
        ...(await import('../../../dist/hono.js')),
        ...(await import(deno ? 'hono/deno' : 'hono/bun')),
      }
    : undefined

/** A Hono app with the middleware in front of `handler`, the peer from Hono's `getConnInfo`. */
function honoApp(options, handler) {
  const app = new hono.Hono()
  app.use(hono.honoRateLimit({ ...options, peer: (c) => hono.getConnInfo(c).remote.address }))
  app.all('*', () => handler())
  return app.fetch
}

const ports = names.map((name) => {
  const scenario = table.find((s) => s.name === name)
  // The handler's runs for this listener so far, this one included.
  let handled = 0
  const handler = () =>
    new Response('ok', { headers: { 'X-Handler': 'yes', 'X-Handled': String(++handled) } })
  const options = scenario.options(lib, undefined)
  const fetch = hono
    ? honoApp(options, handler)
    : withRateLimit(handler, { ...options, peer: deno ? denoPeer : bunPeer })
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
