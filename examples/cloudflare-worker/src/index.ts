// A Worker that rate-limits an API with a Durable Object per client: global, exact limits that
// every PoP and isolate agree on, with the standard RateLimit headers and problem+json 429s.
//
//   npx wrangler dev            (from this folder; see docs/stores/durable-object.md)
//   curl -i http://127.0.0.1:8787/api/hello
//
// The algorithm and quota come from `vars` in wrangler.jsonc, so one Worker can show each of them.
import { env } from 'cloudflare:workers'
import {
  type AlgorithmSpec,
  createLimiter,
  type Duration,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from 'edgelimit'
import { cloudflareIdentity, durableObjectStore, withWaitUntil } from 'edgelimit/cloudflare'
import { withRateLimit } from 'edgelimit/fetch'

// The Durable Object class must be exported by the Worker under the name bound in wrangler.jsonc.
export { EdgelimitDurableObject } from 'edgelimit/cloudflare'

interface Env {
  RATE_LIMITER: DurableObjectNamespace
  /** fixed-window, sliding-log, sliding-window, token-bucket, leaky-bucket, gcra. */
  ALGORITHM?: string
  /** Requests per WINDOW (the burst, for the buckets and GCRA). */
  LIMIT?: string
  WINDOW?: string
  /** HMAC secret for client keys: `npx wrangler secret put KEY_SECRET` (or .dev.vars locally). */
  KEY_SECRET?: string
}

const config = env as unknown as Env

/** The quota as one algorithm: `limit` per `window`, or a bucket of `limit` refilled over `window`. */
function algorithm(name: string, limit: number, window: Duration): AlgorithmSpec {
  switch (name) {
    case 'fixed-window':
      return fixedWindow({ limit, window })
    case 'sliding-log':
      return slidingLog({ limit, window })
    case 'sliding-window':
      return slidingWindow({ limit, window })
    case 'token-bucket':
      return tokenBucket({ capacity: limit, refillRate: limit, refillInterval: window })
    case 'leaky-bucket':
      return leakyBucket({ capacity: limit, leakRate: limit, leakInterval: window })
    case 'gcra':
      return gcra({ limit, period: window })
    default:
      throw new Error(`Unknown ALGORITHM ${JSON.stringify(name)}`)
  }
}

// Built once per isolate: the store makes a stub per request, so nothing here outlives a request.
const limiter = createLimiter({
  rules: [
    {
      name: 'api',
      algorithm: algorithm(
        config.ALGORITHM ?? 'sliding-window',
        Number(config.LIMIT ?? 100),
        (config.WINDOW ?? '1m') as Duration,
      ),
    },
  ],
  store: durableObjectStore({ namespace: config.RATE_LIMITER }),
  // A Durable Object answers in a few ms in its colo; leave room for a queue on a hot key.
  timeout: '1s',
})

/** The API being protected. */
function api(request: Request): Response {
  return Response.json({ ok: true, path: new URL(request.url).pathname })
}

const handler = withRateLimit(api, {
  // Only the API is limited; `/` stays open (no RateLimit headers there).
  routes: [{ path: '/api/**', limiter, name: 'api' }],
  // Workers: the client is CF-Connecting-IP, set by Cloudflare on every request.
  identity: config.KEY_SECRET ? { ...cloudflareIdentity, secret: config.KEY_SECRET } : cloudflareIdentity,
})

export default {
  fetch: withWaitUntil(handler, limiter),
} satisfies ExportedHandler<Env>
