// The behaviour table every adapter must pass. Imported by the vitest process and by the Deno and
// Bun servers, so it takes the library as a parameter (the source in-process, the built `dist`
// in a subprocess) and imports types only.
import type { HttpAnswer, HttpRequest, RateLimitOptions } from '../../../src/http/rate-limit.js'
import type * as Edgelimit from '../../../src/index.js'

/** What a scenario needs from the library. */
export type Lib = Pick<typeof Edgelimit, 'createLimiter' | 'gcra' | 'tokenBucket' | 'leakyBucket'>

/** A clock, or `undefined` for the system clock (subprocess servers). */
export type MaybeClock = Edgelimit.Clock | undefined

/** Which header syntax a response carries, for parsing with `structured-headers`. */
export type Syntax = 'draft-10' | 'draft-7' | 'draft-6' | 'legacy'

/** One request and what must come back. */
export interface Step {
  method?: string
  path: string
  headers?: Record<string, string>
  status: number
  /** Exact header values (lowercase names); `null`: the field must be absent. */
  expect?: Record<string, string | null>
  /**
   * `X-RateLimit-Reset` must be a request's time + this many seconds (epoch seconds): between the
   * scenario's first request being sent and this one's answer.
   */
  legacyResetIn?: number
  /** The problem+json body, all fields but `detail` (any string). */
  problem?: Record<string, unknown>
  /** A non-problem JSON body (a customised answer). */
  json?: unknown
  /** The exact body text ('' for none). */
  body?: string
  /** The adapter must hold the request at least this long (shaping). */
  minDelayMs?: number
  /**
   * The client sends the request and leaves `LEAVE_AFTER_MS` later, before any answer (while the
   * server holds it); `status` and the rest are not checked.
   */
  leaves?: true
}

/** How long a leaving client waits after sending its request: the server has it by then. */
export const LEAVE_AFTER_MS = 100

export interface Scenario {
  name: string
  /** The header syntaxes the responses carry. @default ['draft-10'] */
  syntax?: readonly Syntax[]
  options(lib: Lib, clock: MaybeClock): RateLimitOptions
  steps: readonly Step[]
}

const QUOTA = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const TRUST_LOOPBACK = { trustedProxies: ['127.0.0.1/32', '::1/128'] }
const RATE_LIMIT_FIELDS = [
  'ratelimit',
  'ratelimit-policy',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'retry-after',
]
/** No rate-limit field at all. */
const NONE = Object.fromEntries(RATE_LIMIT_FIELDS.map((name) => [name, null]))

// GCRA at 1 per hour, bursts of `burst`: every value in the headers is a whole number of hours,
// so it is exact under a frozen manual clock and under a real clock within the same second.
function hourly(lib: Lib, clock: MaybeClock, burst = 2, name = 'hourly') {
  return lib.createLimiter({
    rules: [{ name, algorithm: lib.gcra({ limit: 1, period: '1h', burst }) }],
    ...(clock ? { clock } : {}),
  })
}

const quotaExceeded = (path: string, violated: string[], retryAfter?: number) => ({
  type: QUOTA,
  title: 'Too Many Requests',
  status: 429,
  instance: path,
  'violated-policies': violated,
  ...(retryAfter === undefined ? {} : { retryAfter }),
})

const denied = { 'content-type': 'application/problem+json', 'cache-control': 'no-store' }

export const scenarios: readonly Scenario[] = [
  {
    name: 'draft-10 (default): headers on 200 and 429, problem+json, Retry-After',
    options: (lib, clock) => ({ limiter: hourly(lib, clock) }),
    steps: [
      {
        path: '/a?page=1',
        status: 200,
        expect: {
          'ratelimit-policy': '"hourly";q=2;w=7200',
          ratelimit: '"hourly";r=1;t=3600',
          'retry-after': null,
        },
      },
      {
        method: 'POST',
        path: '/b',
        status: 200,
        expect: { 'ratelimit-policy': '"hourly";q=2;w=7200', ratelimit: '"hourly";r=0;t=7200' },
      },
      {
        path: '/orders/7?x=1',
        status: 429,
        expect: {
          ...denied,
          'ratelimit-policy': '"hourly";q=2;w=7200',
          ratelimit: '"hourly";r=0;t=3600',
          'retry-after': '3600',
        },
        problem: quotaExceeded('/orders/7', ['hourly'], 3600),
      },
      // The path as sent: every adapter keeps its escapes.
      { path: '/orders/a%20b?x=1', status: 429, problem: quotaExceeded('/orders/a%20b', ['hourly'], 3600) },
    ],
  },
  {
    name: 'draft-10 with two rules: one member per rule, the violated one named',
    options: (lib, clock) => ({
      limiter: lib.createLimiter({
        rules: [
          { name: 'burst', algorithm: lib.tokenBucket({ capacity: 2, refillRate: 1, refillInterval: '1h' }) },
          { name: 'daily', algorithm: lib.gcra({ limit: 10, period: '1d' }) },
        ],
        ...(clock ? { clock } : {}),
      }),
    }),
    steps: [
      {
        path: '/',
        status: 200,
        expect: {
          'ratelimit-policy': '"burst";q=2;w=7200, "daily";q=10;w=86400',
          ratelimit: '"burst";r=1;t=3600, "daily";r=9;t=8640',
        },
      },
      { path: '/', status: 200, expect: { ratelimit: '"burst";r=0;t=7200, "daily";r=8;t=17280' } },
      {
        path: '/',
        status: 429,
        expect: { ...denied, ratelimit: '"burst";r=0;t=3600, "daily";r=8;t=17280', 'retry-after': '3600' },
        problem: quotaExceeded('/', ['burst'], 3600),
      },
    ],
  },
  {
    name: 'draft-7',
    syntax: ['draft-7'],
    options: (lib, clock) => ({ limiter: hourly(lib, clock), headers: 'draft-7' }),
    steps: [
      {
        path: '/',
        status: 200,
        expect: { ratelimit: 'limit=2, remaining=1, reset=3600', 'ratelimit-policy': '2;w=7200' },
      },
      { path: '/', status: 200, expect: { ratelimit: 'limit=2, remaining=0, reset=7200' } },
      {
        path: '/',
        status: 429,
        expect: {
          ...denied,
          ratelimit: 'limit=2, remaining=0, reset=3600',
          'ratelimit-policy': '2;w=7200',
          'retry-after': '3600',
        },
        problem: quotaExceeded('/', ['hourly'], 3600),
      },
    ],
  },
  {
    name: 'draft-6',
    syntax: ['draft-6'],
    options: (lib, clock) => ({ limiter: hourly(lib, clock), headers: 'draft-6' }),
    steps: [
      {
        path: '/',
        status: 200,
        expect: {
          'ratelimit-limit': '2',
          'ratelimit-remaining': '1',
          'ratelimit-reset': '3600',
          'ratelimit-policy': '2;w=7200',
          ratelimit: null,
        },
      },
      { path: '/', status: 200 },
      {
        path: '/',
        status: 429,
        expect: { ...denied, 'ratelimit-remaining': '0', 'ratelimit-reset': '3600', 'retry-after': '3600' },
        problem: quotaExceeded('/', ['hourly'], 3600),
      },
    ],
  },
  {
    name: 'legacy X-RateLimit-* with draft-7 (a list of standards)',
    syntax: ['draft-7', 'legacy'],
    options: (lib, clock) => ({ limiter: hourly(lib, clock), headers: ['draft-7', 'legacy'] }),
    steps: [
      {
        path: '/',
        status: 200,
        expect: {
          'x-ratelimit-limit': '2',
          'x-ratelimit-remaining': '1',
          ratelimit: 'limit=2, remaining=1, reset=3600',
        },
        legacyResetIn: 3600,
      },
      { path: '/', status: 200, expect: { 'x-ratelimit-remaining': '0' }, legacyResetIn: 7200 },
      {
        path: '/',
        status: 429,
        expect: { ...denied, 'x-ratelimit-remaining': '0', 'retry-after': '3600' },
        legacyResetIn: 3600,
        problem: quotaExceeded('/', ['hourly'], 3600),
      },
    ],
  },
  {
    name: 'headers: false still answers 429 with Retry-After',
    syntax: [],
    options: (lib, clock) => ({ limiter: hourly(lib, clock, 1), headers: false }),
    steps: [
      { path: '/', status: 200, expect: NONE },
      {
        path: '/',
        status: 429,
        expect: { ...NONE, ...denied, 'retry-after': '3600' },
        problem: quotaExceeded('/', ['hourly'], 3600),
      },
    ],
  },
  {
    name: 'per-route limiters, sharded by route, with methods',
    options: (lib, clock) => {
      const shared = hourly(lib, clock, 1, 'route')
      return {
        limiter: hourly(lib, clock, 5, 'global'),
        routes: [
          { path: '/api/*', limiter: shared },
          { path: '/files/**', limiter: shared, methods: ['POST'] },
        ],
      }
    },
    steps: [
      { path: '/api/x', status: 200, expect: { ratelimit: '"route";r=0;t=3600' } },
      {
        path: '/api/y',
        status: 429,
        expect: { ratelimit: '"route";r=0;t=3600', 'retry-after': '3600' },
        problem: quotaExceeded('/api/y', ['route'], 3600),
      },
      // `/api/` is under `/api/*` too (Fastify and Hono route it there), though its route form is `/api`.
      {
        path: '/api/',
        status: 429,
        expect: { ratelimit: '"route";r=0;t=3600', 'retry-after': '3600' },
        problem: quotaExceeded('/api/', ['route'], 3600),
      },
      // Same limiter, another route: its own shard.
      { method: 'POST', path: '/files/a/b', status: 200, expect: { ratelimit: '"route";r=0;t=3600' } },
      { method: 'GET', path: '/files/a/b', status: 200, expect: { ratelimit: '"global";r=4;t=3600' } },
      {
        path: '/elsewhere',
        status: 200,
        expect: { 'ratelimit-policy': '"global";q=5;w=18000', ratelimit: '"global";r=3;t=7200' },
      },
    ],
  },
  {
    name: 'cost function',
    options: (lib, clock) => ({
      limiter: lib.createLimiter({
        rules: [
          { name: 'units', algorithm: lib.tokenBucket({ capacity: 5, refillRate: 1, refillInterval: '1h' }) },
        ],
        ...(clock ? { clock } : {}),
      }),
      cost: (request: HttpRequest) =>
        request.path.startsWith('/bulk') ? 3 : request.path === '/huge' ? 9 : 1,
    }),
    steps: [
      { path: '/bulk', status: 200, expect: { ratelimit: '"units";r=2;t=10800' } },
      {
        path: '/bulk',
        status: 429,
        expect: { ratelimit: '"units";r=2;t=3600', 'retry-after': '3600' },
        problem: quotaExceeded('/bulk', ['units'], 3600),
      },
      { path: '/one', status: 200, expect: { ratelimit: '"units";r=1;t=14400' } },
      // More than the bucket holds: denied for good, so no Retry-After and no retryAfter.
      {
        path: '/huge',
        status: 429,
        expect: { 'retry-after': null },
        problem: quotaExceeded('/huge', ['units']),
      },
    ],
  },
  {
    name: 'skip: no limiting, no headers, nothing charged',
    options: (lib, clock) => ({
      limiter: hourly(lib, clock, 1),
      skip: (request) => request.path === '/health',
    }),
    steps: [
      { path: '/health', status: 200, expect: NONE },
      { path: '/health', status: 200, expect: NONE },
      { path: '/', status: 200, expect: { ratelimit: '"hourly";r=0;t=3600' } },
      { path: '/health', status: 200, expect: NONE },
      { path: '/', status: 429 },
    ],
  },
  {
    name: 'allowList: an allowed client address is never limited',
    options: (lib, clock) => ({
      limiter: hourly(lib, clock, 1),
      identity: TRUST_LOOPBACK,
      allowList: ['203.0.113.9'],
    }),
    steps: [
      { path: '/', headers: { 'x-forwarded-for': '203.0.113.9' }, status: 200, expect: NONE },
      { path: '/', headers: { 'x-forwarded-for': '203.0.113.9' }, status: 200, expect: NONE },
      { path: '/', headers: { 'x-forwarded-for': '203.0.113.10' }, status: 200 },
      { path: '/', headers: { 'x-forwarded-for': '203.0.113.10' }, status: 429 },
    ],
  },
  {
    name: 'onLimited replaces the answer',
    options: (lib, clock) => ({
      limiter: hourly(lib, clock, 1),
      onLimited: ({ decision, response }) => ({
        status: 429,
        headers: [
          ...response.headers.filter(([name]) => name.toLowerCase() !== 'content-type'),
          ['Content-Type', 'application/json'],
          // A repeated name: every value is sent, whatever the adapter.
          ['set-cookie', 'a=1'],
          ['Set-Cookie', 'b=2'],
          ['vary', 'x'],
          ['vary', 'y'],
        ],
        body: JSON.stringify({ error: 'slow down', rule: decision.rules[0]?.name }),
      }),
    }),
    steps: [
      { path: '/', status: 200 },
      {
        path: '/',
        status: 429,
        expect: {
          'content-type': 'application/json',
          'cache-control': 'no-store',
          'retry-after': '3600',
          ratelimit: '"hourly";r=0;t=3600',
          'set-cookie': 'a=1, b=2',
          vary: 'x, y',
        },
        json: { error: 'slow down', rule: 'hourly' },
      },
    ],
  },
  {
    name: 'onLimited: a 204, 205 or 304 answer is sent without its body (a Response with one throws)',
    options: (lib, clock) => ({
      limiter: hourly(lib, clock, 1),
      onLimited: ({ request, response }) => ({ ...response, status: Number(request.header('x-status')) }),
    }),
    steps: [
      { path: '/', status: 200 },
      ...[204, 205, 304].map((status) => ({
        path: '/',
        headers: { 'x-status': String(status) },
        status,
        body: '',
        // The rate-limit fields are still sent.
        expect: { 'retry-after': '3600', ratelimit: '"hourly";r=0;t=3600' },
      })),
      // Any other status keeps its body.
      {
        path: '/',
        headers: { 'x-status': '429' },
        status: 429,
        problem: quotaExceeded('/', ['hourly'], 3600),
      },
    ],
  },
  {
    name: 'onLimited: an answer of another shape is refused (the framework 500), not half sent',
    options: (lib, clock) => {
      const malformed: Record<string, unknown> = {
        // What fetch and Hono users reach for; its headers and body are not an HttpAnswer's.
        'a Response': new Response('slow down', { status: 429, headers: { 'x-custom': '1' } }),
        'headers as an object': { status: 429, headers: { 'x-custom': '1' }, body: 'slow down' },
        'no headers': { status: 429, body: 'slow down' },
        'status as a string': { status: '429', headers: [['x-custom', '1']], body: 'slow down' },
        'status 1xx': { status: 199, headers: [['x-custom', '1']], body: 'slow down' },
        'status 600': { status: 600, headers: [['x-custom', '1']], body: 'slow down' },
        'a fractional status': { status: 429.5, headers: [['x-custom', '1']], body: 'slow down' },
        'bytes as the body': { status: 429, headers: [['x-custom', '1']], body: new Uint8Array([1]) },
      }
      return {
        limiter: hourly(lib, clock, 1),
        onLimited: ({ request, response }) => {
          const chosen = request.header('x-answer')
          return (chosen ? malformed[chosen] : { ...response, status: 503 }) as HttpAnswer
        },
      }
    },
    steps: [
      { path: '/', status: 200 },
      ...[
        'a Response',
        'headers as an object',
        'no headers',
        'status as a string',
        'status 1xx',
        'status 600',
        'a fractional status',
        'bytes as the body',
      ].map((answer) => ({
        path: '/',
        headers: { 'x-answer': answer },
        status: 500,
        expect: { 'x-custom': null },
      })),
      // Still limited, and a well-formed answer is sent as given.
      { path: '/', status: 503, expect: { ratelimit: '"hourly";r=0;t=3600', 'retry-after': '3600' } },
    ],
  },
  {
    name: 'key function: an API key has its own quota; no key falls back to the address',
    options: (lib, clock) => ({
      limiter: hourly(lib, clock, 1),
      key: (request) => request.header('x-api-key') ?? undefined,
    }),
    steps: [
      { path: '/', headers: { 'x-api-key': 'alpha' }, status: 200 },
      { path: '/', headers: { 'x-api-key': 'alpha' }, status: 429 },
      { path: '/', headers: { 'x-api-key': 'beta' }, status: 200 },
      { path: '/', status: 200 },
      { path: '/', status: 429 },
    ],
  },
  {
    name: 'two clients behind a trusted proxy (X-Forwarded-For) are limited apart',
    options: (lib, clock) => ({ limiter: hourly(lib, clock, 1), identity: TRUST_LOOPBACK }),
    steps: [
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.1' }, status: 200 },
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.1' }, status: 429 },
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.2' }, status: 200 },
      // The right-most untrusted entry is the client: a forged left part changes nothing.
      { path: '/', headers: { 'x-forwarded-for': '6.6.6.6, 198.51.100.2' }, status: 429 },
    ],
  },
  {
    // As express's `trust proxy` and nginx's realip read it: the proxy made the request itself (a
    // health check), so its own address is the client — here an allowed one, never limited.
    name: "a trusted proxy's own request (no X-Forwarded-For) is keyed by the proxy's address",
    options: (lib, clock) => ({
      limiter: hourly(lib, clock, 1),
      identity: TRUST_LOOPBACK,
      allowList: ['127.0.0.1', '::1'],
    }),
    steps: [
      { path: '/', status: 200, expect: NONE },
      { path: '/', status: 200, expect: NONE },
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.1' }, status: 200 },
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.1' }, status: 429 },
    ],
  },
  {
    name: 'without trust, a forged X-Forwarded-For is ignored',
    options: (lib, clock) => ({ limiter: hourly(lib, clock, 1) }),
    steps: [
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.1' }, status: 200 },
      { path: '/', headers: { 'x-forwarded-for': '198.51.100.2' }, status: 429 },
      { path: '/', status: 429 },
    ],
  },
  {
    name: 'shaping: an admitted request is held for delayMs',
    options: (lib, clock) => ({
      limiter: lib.createLimiter({
        rules: [{ name: 'smooth', algorithm: lib.leakyBucket({ capacity: 2, leakRate: 5, mode: 'shape' }) }],
        ...(clock ? { clock } : {}),
      }),
    }),
    steps: [
      { path: '/', status: 200 },
      { path: '/', status: 200, minDelayMs: 100 },
    ],
  },
]

/**
 * Served by the targets where the fetch wrapper owns the request's connection (the Node bridge,
 * Deno, Bun), whose handler counts its runs in `x-handled`: a held request whose client leaves is
 * dropped, as every other adapter drops it (adapters.test.ts) and nginx does.
 */
export const leaving: readonly Scenario[] = [
  {
    name: 'shaping: a held request whose client leaves is dropped, not handed on',
    options: (lib, clock) => ({
      limiter: lib.createLimiter({
        rules: [
          {
            name: 'smooth',
            algorithm: lib.leakyBucket({ capacity: 5, leakRate: 1, leakInterval: '1s', mode: 'shape' }),
          },
        ],
        ...(clock ? { clock } : {}),
      }),
    }),
    steps: [
      { path: '/', status: 200, expect: { 'x-handled': '1' } },
      // Held 1 s: its client leaves as soon as the server has it.
      { path: '/', status: 0, leaves: true },
      // Held 2 s less the time gone by (under 1 s had the second not been charged, so the server
      // had it): when it is answered, the second's hold has ended, and its handler did not run.
      { path: '/', status: 200, minDelayMs: 1200, expect: { 'x-handled': '2' } },
    ],
  },
]
