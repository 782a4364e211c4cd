// The fetch-adapter behaviour table inside workerd, with the BUILT package as a Worker bundles
// it: one limiter set per scenario (chosen by the `x-edgelimit-scenario` header the test bridge
// adds), the client address from CF-Connecting-IP as Cloudflare (here miniflare) sets it.
import { cloudflarePeer } from '../../../dist/cloudflare.js'
import { withRateLimit } from '../../../dist/fetch.js'
import * as lib from '../../../dist/index.js'
import { scenarios } from '../../adapters/support/scenarios.ts'

export { EdgelimitDurableObject } from '../../../dist/cloudflare.js'

const handler = () => new Response('ok', { headers: { 'X-Handler': 'yes' } })
// Built on first use: a Worker's global scope may not generate randomness or read the clock.
const handlers = []

export default {
  fetch(request) {
    const index = Number(request.headers.get('x-edgelimit-scenario'))
    const scenario = scenarios[index]
    if (scenario === undefined) return new Response('unknown scenario', { status: 404 })
    handlers[index] ??= withRateLimit(handler, { ...scenario.options(lib, undefined), peer: cloudflarePeer })
    return handlers[index](request)
  },
}
