// A Worker that rate-limits an API with a Durable Object per client: global, exact limits that
// every PoP and isolate agree on, with the standard RateLimit headers and problem+json 429s.
//
//   npx wrangler dev            (from this folder; see docs/stores/durable-object.md)
//   curl -i http://127.0.0.1:8787/api/hello
//
// The algorithm and quota come from `vars` in wrangler.jsonc, so one Worker can show each of them.
// With `leaky-bucket-shape` the quota is a queue rather than a wall: requests beyond the one in
// service wait their turn (up to LIMIT − 1 of them, released at LIMIT per WINDOW) and only the rest
// get a 429. A Worker does not hold a connection for minutes, so a queued request is accepted at
// once with `202 Accepted` and its place in the queue, to be carried out when its turn comes (hand
// it to a queue with that delay, e.g. Cloudflare Queues' `send(body, { delaySeconds })`).
import { env } from 'cloudflare:workers'
import {
  type AlgorithmSpec,
  createLimiter,
  type Duration,
  fixedWindow,
  gcra,
  leakyBucket,
  parseDuration,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from 'edgelimit'
import { cloudflareIdentity, durableObjectStore, withWaitUntil } from 'edgelimit/cloudflare'
import { createRateLimit, type HttpAnswer } from 'edgelimit/http'

// The Durable Object class must be exported by the Worker under the name bound in wrangler.jsonc.
export { EdgelimitDurableObject } from 'edgelimit/cloudflare'

interface Env {
  RATE_LIMITER: DurableObjectNamespace
  /** fixed-window, sliding-log, sliding-window, token-bucket, leaky-bucket, leaky-bucket-shape, gcra. */
  ALGORITHM?: string
  /** Requests per WINDOW (the burst, for the buckets and GCRA). */
  LIMIT?: string
  WINDOW?: string
  /** HMAC secret for client keys: `npx wrangler secret put KEY_SECRET` (or .dev.vars locally). */
  KEY_SECRET?: string
}

const config = env as unknown as Env

/**
 * The quota as one algorithm: `limit` per `window`, a bucket of `limit` refilled over `window`, or
 * (shape) a queue of `limit` (one in service, `limit − 1` waiting) served at `limit` per `window`.
 */
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
    case 'leaky-bucket-shape':
      return leakyBucket({ capacity: limit - 1, leakRate: limit, leakInterval: window, mode: 'shape' })
    case 'gcra':
      return gcra({ limit, period: window })
    default:
      throw new Error(`Unknown ALGORITHM ${JSON.stringify(name)}`)
  }
}

const LIMIT = Number(config.LIMIT ?? 100)
const WINDOW = (config.WINDOW ?? '1m') as Duration
/** Shaping releases one queued request every WINDOW / LIMIT (createLimiter rejects a bad WINDOW). */
const RELEASE_MS = (parseDuration(WINDOW) ?? Number.NaN) / LIMIT

// Built once per isolate: the store makes a stub per request, so nothing here outlives a request.
const limiter = createLimiter({
  rules: [{ name: 'api', algorithm: algorithm(config.ALGORITHM ?? 'sliding-window', LIMIT, WINDOW) }],
  store: durableObjectStore({ namespace: config.RATE_LIMITER }),
  // A Durable Object answers in a few ms in its colo; leave room for a queue on a hot key.
  timeout: '1s',
})

const rateLimit = createRateLimit({
  // Only the API is limited; `/` stays open (no RateLimit headers there).
  routes: [{ path: '/api/**', limiter, name: 'api' }],
  // Workers: the client is CF-Connecting-IP, set by Cloudflare on every request.
  identity: config.KEY_SECRET ? { ...cloudflareIdentity, secret: config.KEY_SECRET } : cloudflareIdentity,
})

/** The API being protected. */
function api(request: Request): Response {
  return Response.json({ ok: true, path: new URL(request.url).pathname })
}

/**
 * A request the shaping queue admitted behind others: accepted now, due in `delayMs`. A real API
 * would enqueue the work here with that delay; the answer tells the client its place.
 */
function queued(request: Request, delayMs: number): Response {
  const position = Math.round(delayMs / RELEASE_MS)
  return Response.json(
    { queued: true, path: new URL(request.url).pathname, position, delayMs },
    { status: 202 },
  )
}

/** The 429 (or 503) problem+json answer of the HTTP layer. */
function answer(response: HttpAnswer): Response {
  const headers = new Headers()
  for (const [name, value] of response.headers) headers.set(name, value)
  return new Response(response.body, { status: response.status, headers })
}

async function handler(request: Request): Promise<Response> {
  const verdict = await rateLimit.check({
    method: request.method,
    path: new URL(request.url).pathname,
    header: (name) => request.headers.get(name),
  })
  if (verdict.action === 'respond' && verdict.response !== undefined) return answer(verdict.response)
  const response = verdict.delayMs > 0 ? queued(request, verdict.delayMs) : api(request)
  for (const [name, value] of verdict.headers) response.headers.set(name, value)
  return response
}

export default {
  // Approximate-consistency rules send their counts after the response.
  fetch: withWaitUntil(handler, limiter),
} satisfies ExportedHandler<Env>
