// The fetch-adapter behaviour table inside Vercel's edge-runtime (a V8 isolate with Web APIs
// only), with the BUILT package bundled as Vercel bundles an Edge Function: one limiter set per
// scenario, chosen by the `x-edgelimit-scenario` header the test bridge adds. The isolate has no
// socket: the peer is what the bridge saw (`x-edgelimit-peer`), as a platform would hand it over.
import { withRateLimit } from '../../../dist/fetch.js'
import * as lib from '../../../dist/index.js'
import { scenarios } from './scenarios.ts'

const handler = () => new Response('ok', { headers: { 'X-Handler': 'yes' } })
const peer = (request) => request.headers.get('x-edgelimit-peer') ?? undefined
const handlers = []

addEventListener('fetch', (event) => {
  const index = Number(event.request.headers.get('x-edgelimit-scenario'))
  const scenario = scenarios[index]
  if (scenario === undefined) return event.respondWith(new Response('unknown scenario', { status: 404 }))
  handlers[index] ??= withRateLimit(handler, { ...scenario.options(lib, undefined), peer })
  event.respondWith(handlers[index](event.request))
})
