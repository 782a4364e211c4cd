import { type Clock, systemClock } from '../clock.js'
import { ConfigError, describe, EdgelimitError } from '../errors.js'
import { type Decision, type Limiter, whole } from '../limiter.js'
import { remember } from '../remember.js'
import { createIssues, type Issues } from '../validate.js'
import {
  checkStandards,
  type HeaderRenderer,
  type HeaderStandard,
  headerRenderer,
  quotaPolicy,
  sfBinary,
} from './headers.js'
import {
  base64url,
  CIDR_OR_ADDRESS,
  type ClientKeyOptions,
  compileIdentity,
  digest,
  resolveWith,
  validateClientKeyOptions,
} from './identity.js'
import { type Cidr, formatIp, inNetwork, type ParsedIp, parseCidr, parseIp, subnetText } from './ip.js'
import { pathGlob, routePath } from './path.js'
import { type ProblemDetails, problemFor } from './problem.js'

/** What every adapter hands the HTTP layer: runtime differences end here. */
export interface HttpRequest {
  readonly method: string
  /** The URL path, without the query: the one the framework routes, which `routes` match. */
  readonly path: string
  /**
   * The problem's `instance` when it is not `path`: the path as the client sent it, where the
   * framework routes another (a URL rewrite, Fastify's `;…`). @default path
   */
  readonly instance?: string | undefined
  header(name: string): string | null | undefined
  /** The direct peer's address (the socket), when the runtime has one. */
  readonly peer?: string | undefined
}

/** A key function: API key, user id, header… `undefined`, `null` or `''` falls back to the client address. */
export type KeyFunction = (request: HttpRequest) => string | undefined | Promise<string | undefined>

/** A request's cost: a non-negative integer, or a function returning one (checked per request). */
export type CostOption = number | ((request: HttpRequest) => number | Promise<number>)

/** A limiter applied to matching requests only. */
export interface RouteRule {
  /**
   * The full path (also under a mounted router or a prefixed plugin: `/auth/login`), exact or a
   * glob (`/api/*`: one segment, `/api/` and so `/api` too; `/files/**`: any depth, `/files`
   * too, and a `**` segment in the middle is any depth too, none included, as a globstar is in
   * gitignore), matched whatever the case, trailing `/` and spelling (`//`, `%6C`, `..`, `\`) of the
   * request's path (`routePath` in `edgelimit/http`); or a RegExp (without the `g` or `y` flag),
   * tested on the path as it came.
   */
  path: string | RegExp
  /**
   * Upper-case methods (one or more); all when omitted. `GET` covers `HEAD` too, as frameworks
   * route it.
   */
  methods?: readonly string[]
  limiter: Limiter
  /**
   * Shards keys by route (`r:<name>:<client key>`). Two routes on one path (by method, say) whose
   * limiters share a store and rule names share their counts unless each has its own name.
   * @default the path pattern
   */
  name?: string
  cost?: CostOption
  key?: KeyFunction
}

/** An HTTP answer, framework-neutral (see `RateLimitOptions.onLimited` for what is checked). */
export interface HttpAnswer {
  readonly status: number
  readonly headers: readonly (readonly [string, string])[]
  readonly body: string
}

/** The outcome for one request. */
export interface HttpVerdict {
  /** `continue`: pass to the handler with `headers` added; `respond`: send `response` instead. */
  readonly action: 'continue' | 'respond'
  readonly headers: readonly (readonly [string, string])[]
  readonly response?: HttpAnswer
  /** Shaping: hold the request this long before passing it on. */
  readonly delayMs: number
  readonly decision?: Decision
  /**
   * The store key the request was counted under: `k:<key>` for a key function's key
   * (`kh:<hash>` when it is over 128 characters), `ip:<hash>` for the client address (`ip:<fallback>` without one), prefixed with
   * `r:<route name>:` on a route. The namespaces keep a client from choosing another's bucket.
   */
  readonly key?: string
}

/** Options shared by every adapter. */
export interface RateLimitOptions {
  /** The limiter for requests that match no route. Omit to limit only `routes`. */
  limiter?: Limiter
  /** Per-route limiters; the first match applies, with keys sharded by route. */
  routes?: readonly RouteRule[]
  /** How to identify the client. @default the client address (see `identity`) */
  key?: KeyFunction
  /** Client address resolution, subnet grouping and hashing. */
  identity?: ClientKeyOptions
  /**
   * Units a request costs. A function's result is checked on each request: anything but a
   * non-negative integer rejects the check with an `EdgelimitError` (`ERR_EDGELIMIT_COST`), which
   * every adapter hands to its framework's error path (Express `next(err)`, a Fastify or Hono
   * 500, a rejected promise from the Node and fetch adapters); nothing is charged.
   * @default 1
   */
  cost?: CostOption
  /** Requests that bypass the limiter entirely (no headers). */
  skip?: (request: HttpRequest) => boolean | Promise<boolean>
  /**
   * Clients that are never limited (no headers). An address or CIDR (`'203.0.113.9'`,
   * `'2001:db8::/32'`, `'10.0.0.0/8'`; any textual form, IPv4-mapped IPv6 counts as IPv4) matches
   * the resolved client address, also when a key function picks the key; any other string
   * matches a key function's key exactly. An entry that looks like an address — in brackets, or
   * made only of hex digits and `.:/*-,%` with a `.` or `:` in it (`'10.0.0.*'`, `'127.1'`,
   * `'fe80::1%eth0'`) — must parse, else it is a `ConfigError`; a plain hex word (`'deadbeef'`) or
   * one with other letters (`'user:42'`) is a key.
   * @example allowList: ['10.0.0.0/8', '::1', 'internal-api-key']
   */
  allowList?: readonly string[]
  /** Header fields to emit, or `false` for none. @default 'draft-10' */
  headers?: HeaderStandard | readonly HeaderStandard[] | false
  /**
   * Adds `pk` (the client's partition key, HMAC-hashed under `identity.secret`, never raw) to the
   * draft-10 fields. `true` without `identity.secret` is a `ConfigError`
   * (`ERR_PARTITION_KEY`): an unkeyed hash of a key can be checked against guesses.
   * @default false
   */
  partitionKey?: boolean
  /**
   * The clock for header timestamps (the legacy `X-RateLimit-Reset`, in epoch seconds). Pass the
   * limiter's clock so both agree. Decisions use the limiter's own clock.
   * A reading that is not a non-negative integer fails the request with `ERR_EDGELIMIT_CLOCK`,
   * as the limiter's clock does.
   * @default systemClock
   * @example createRateLimit({ limiter, headers: 'legacy', clock: manualClock(0) })
   */
  clock?: Clock
  /**
   * Replaces the 429/503 answer. Return nothing to keep the default, or an `HttpAnswer`: `status`
   * an integer from 200 to 599, `headers` an array of `[name, value]` string pairs, `body` a
   * string. Anything else (a Web `Response`, headers as an object or missing, a stream as the
   * body…) rejects the check with an `EdgelimitError` (`ERR_EDGELIMIT_ON_LIMITED`), which every
   * adapter hands to its framework's error path (a 500), as for `cost`. The fields inside
   * `headers` are checked by the framework, as its own are. Every pair is sent: a name repeated
   * (two `set-cookie`) goes out with each value, by every adapter; to change a field of the
   * default answer, filter it out of `response.headers` (names are lower case) and add yours. A
   * 204, 205 or 304 has no content (RFC 9110): every adapter sends it without `body`.
   * @example onLimited: ({ response }) => ({ ...response, body: JSON.stringify({ ...JSON.parse(response.body), detail: 'slow down' }) })
   */
  onLimited?: (context: {
    request: HttpRequest
    decision: Decision
    response: HttpAnswer
  }) => HttpAnswer | undefined | Promise<HttpAnswer | undefined>
}

/** The shared HTTP behaviour behind every adapter. */
export interface HttpRateLimit {
  check(request: HttpRequest): Promise<HttpVerdict>
  /** Counters: requests keyed by the fallback because their address was missing or malformed. */
  readonly stats: { readonly fallbackKeys: number }
}

const PASS: HttpVerdict = { action: 'continue', headers: [], delayMs: 0 }
/** Client addresses whose key is kept (about 150 bytes each); beyond, the oldest is dropped. */
const KNOWN_ADDRESSES = 10_000

interface CompiledRoute extends RouteRule {
  /** A glob tests the route form of the path (`routePath`); a RegExp, the path as it came. */
  readonly pattern: { test(path: string): boolean }
  /** `r:<name>:`, with `%` and `:` escaped in the name so that route and client key split one way. */
  readonly prefix: string
}

interface AllowList {
  readonly keys: ReadonlySet<string>
  /** Single addresses, canonical (`formatIp`), as `clientKey` reports them. */
  readonly hosts: ReadonlySet<string>
  readonly networks: readonly Cidr[]
}

function checkCost(issues: Issues, path: string, value: unknown): void {
  if (typeof value === 'number') issues.integer(path, value, 0, 2 ** 53 - 1)
  else
    issues.expect(
      path,
      value,
      value === undefined || typeof value === 'function',
      'ERR_COST',
      'a non-negative integer or a function',
    )
}

function checkLimiter(issues: Issues, path: string, value: unknown): void {
  const l = value as Partial<Limiter> | null | undefined
  issues.expect(
    path,
    value,
    typeof l?.limit === 'function' && Array.isArray(l.rules),
    'ERR_LIMITER',
    'a limiter from createLimiter()',
  )
}

/** Whether `value` is an array of at least `min` items; else reports `expected an array of <what>`. */
function checkArray(issues: Issues, path: string, value: unknown, what: string, min = 0): value is unknown[] {
  return issues.expect(
    path,
    value,
    Array.isArray(value) && value.length >= min,
    'ERR_ARRAY',
    `an array of ${what}`,
  )
}

function checkRoute(issues: Issues, at: string, route: unknown): void {
  if (!issues.object(at, route, 'path methods limiter name cost key')) return
  const { path, methods } = route
  if (path instanceof RegExp) {
    if (path.global || path.sticky)
      issues.add(`${at}.path`, 'ERR_ROUTE_PATH', `expected a RegExp without the g or y flag, got ${path}`)
  } else {
    issues.expect(
      `${at}.path`,
      path,
      typeof path === 'string' && /^[/*]/.test(path),
      'ERR_ROUTE_PATH',
      'a path or glob starting with "/" (like "/api/*"), or a RegExp',
    )
  }
  // An empty list would make a route that never matches: refused, as the gateway's policy does.
  if (methods !== undefined && checkArray(issues, `${at}.methods`, methods, 'one or more methods', 1)) {
    methods.forEach((m, i) => {
      // Upper-case HTTP method tokens (RFC 9110 §9.1): request methods are compared as sent.
      issues.expect(
        `${at}.methods[${i}]`,
        m,
        typeof m === 'string' && /^[!#$%&'*+.^_`|~0-9A-Z-]+$/.test(m),
        'ERR_METHOD',
        'an upper-case method like "GET"',
      )
    })
  }
  checkLimiter(issues, `${at}.limiter`, route.limiter)
  issues.string(`${at}.name`, route.name)
  checkCost(issues, `${at}.cost`, route.cost)
  issues.function(`${at}.key`, route.key)
}

function compileAllowList(issues: Issues, list: unknown): AllowList {
  const allow = { keys: new Set<string>(), hosts: new Set<string>(), networks: [] as Cidr[] }
  if (list === undefined || !checkArray(issues, 'allowList', list, 'addresses, CIDRs or keys')) return allow
  list.forEach((entry, i) => {
    const at = `allowList[${i}]`
    if (
      !issues.expect(at, entry, typeof entry === 'string' && entry !== '', 'ERR_STRING', 'a non-empty string')
    )
      return
    // An entry shaped like an address or network is one, and must parse: bracketed, or made of hex
    // digits and `.:/*-,` only with a `.` or `:` in it (a zone `%…` may follow). A plain hex word
    // (`deadbeef`) or a word with other letters (`user:42`) is a key.
    if (!/^(?:\[|[\da-f.:/*,-]*[.:][\da-f.:/*,-]*(?:%|$))/i.test((entry as string).trim())) {
      allow.keys.add(entry as string)
      return
    }
    const cidr = parseCidr(entry as string)
    if (cidr === undefined) issues.expect(at, entry, false, 'ERR_CIDR', CIDR_OR_ADDRESS)
    else if (cidr.prefix === cidr.bytes.length * 8) allow.hosts.add(formatIp(cidr))
    else allow.networks.push(cidr)
  })
  return allow
}

// Checked when the middleware is created, not on the first request: every problem at once, with
// its path, an unknown option name too; `names`: the adapter's own option names. draft-10/7/6
// together would emit clashing RateLimit(-Policy) fields.
function validateOptions(
  options: RateLimitOptions,
  names: string,
): { standards: HeaderStandard[]; allow: AllowList } {
  const issues = createIssues()
  if (
    !issues.object(
      'options',
      options as unknown,
      `limiter routes key identity cost skip allowList headers partitionKey clock onLimited${names}`,
    )
  )
    throw new ConfigError(issues.list)
  if (options.identity !== undefined)
    issues.list.push(...validateClientKeyOptions(options.identity, 'identity'))
  const h: unknown = options.headers
  // Each standard once: one listed twice would send each of its fields twice (`x-ratelimit-limit: 1, 1`).
  const standards: unknown[] = h === false ? [] : h === undefined ? ['draft-10'] : [...new Set([h].flat())]
  const drafts = checkStandards(issues, 'headers', standards).filter((s) => s !== 'legacy')
  if (drafts.length > 1) {
    issues.add(
      'headers',
      'ERR_HEADER_CONFLICT',
      `${drafts.join(', ')} emit clashing RateLimit fields; choose one (legacy may be added)`,
    )
  }
  if (options.limiter !== undefined) checkLimiter(issues, 'limiter', options.limiter)
  const routes: unknown = options.routes
  if (routes !== undefined && checkArray(issues, 'routes', routes, 'routes'))
    routes.forEach((route, i) => {
      checkRoute(issues, `routes[${i}]`, route)
    })
  checkCost(issues, 'cost', options.cost)
  // `peer`: the fetch and Hono adapters' (elsewhere also an unknown name), called per request.
  for (const name of ['key', 'skip', 'onLimited', 'peer'])
    issues.function(name, (options as Record<string, unknown>)[name])
  issues.boolean('partitionKey', options.partitionKey)
  // Unkeyed, pk would be a plain SHA-256 of the key: a guessed key could be checked offline.
  if (options.partitionKey === true && !options.identity?.secret)
    issues.add('partitionKey', 'ERR_PARTITION_KEY', 'needs identity.secret')
  issues.having('clock', options.clock, 'now', 'ERR_CLOCK', 'an object with a now() method')
  const allow = compileAllowList(issues, options.allowList)
  // Without routes, `limiter` is what every request is checked against: required. Unless
  // something is wrong already (`rules:` misspelt for `routes:`), which would be the cause.
  if (!issues.list.length && options.limiter === undefined && !options.routes?.length)
    checkLimiter(issues, 'limiter', undefined)
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  return { standards: standards as HeaderStandard[], allow }
}

// No address (undefined) is in either: `hosts` holds strings, and parseIp takes only strings.
function isAllowed(allow: AllowList, ip: string | undefined): boolean {
  if (allow.hosts.has(ip as string)) return true
  if (allow.networks.length === 0) return false
  const parsed = parseIp(ip as string)
  return parsed !== undefined && allow.networks.some((network) => inNetwork(parsed, network))
}

/** A cost function's answer, checked: it runs per request, so it cannot be validated up front. */
function checkedCost(cost: unknown, request: HttpRequest, where: string): number {
  if (Number.isSafeInteger(cost) && (cost as number) >= 0) return cost as number
  throw new EdgelimitError(
    'ERR_EDGELIMIT_COST',
    `The ${where} function returned ${describe(cost)} for ${request.method} ${request.path}; expected a non-negative integer`,
  )
}

/**
 * An `onLimited` answer, checked, so that every adapter refuses the same ones (each would
 * mis-send another shape in its own way): a string body, headers an array (each framework checks
 * the fields in it as it checks its own), a status from 200 to 599 (as the `Response` constructor
 * takes).
 */
function checkedAnswer(answer: HttpAnswer, request: HttpRequest): HttpAnswer {
  const status = answer.status
  if (
    typeof answer.body === 'string' &&
    Array.isArray(answer.headers) &&
    status > 199 &&
    status < 600 &&
    Number.isInteger(status)
  )
    return answer
  throw new EdgelimitError(
    'ERR_EDGELIMIT_ON_LIMITED',
    `The onLimited function returned ${describe(answer)} for ${request.method} ${request.path}; expected nothing or an HttpAnswer`,
  )
}

/**
 * `f(value, a, b, c)`: now, or once `value` settles when it is a value that `await` would wait
 * for. The arguments go through, so that a caller passes a function made once rather than a
 * closure per call (per request on the synchronous path).
 */
export function after<T, R, A = undefined, B = undefined, C = undefined>(
  value: T | PromiseLike<T>,
  f: (value: T, a: A, b: B, c: C) => R,
  a?: A,
  b?: B,
  c?: C,
): R | Promise<Awaited<R>> {
  // `?.then` on a primitive reads its prototype, which has no `then`.
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function'
    ? (Promise.resolve(value as T).then((v) => f(v, a as A, b as B, c as C)) as Promise<Awaited<R>>)
    : f(value as T, a as A, b as B, c as C)
}

/** What a request is charged to: a route, or the default limiter. Built once per route. */
interface Target {
  readonly limiter: Limiter
  /** `limitSync` works (an in-process store): no promise per decision. Cleared on the first refusal. */
  sync: boolean
  /** A cost function, or `{ cost }` for a fixed cost, shared by every call. */
  readonly cost: ((request: HttpRequest) => number | Promise<number>) | { readonly cost: number }
  readonly where: string
  readonly render: HeaderRenderer
  readonly route: CompiledRoute | undefined
}

/**
 * The behaviour every adapter shares: pick the route's limiter, derive a key that cannot be
 * spoofed, charge the cost, and answer with the standard headers on every response and a
 * problem+json 429 (or 503 when the store is down under fail-closed).
 *
 * Keys live in separate namespaces (see `HttpVerdict.key`): whatever a key function returns (an
 * API key a client sends, say) never lands in the bucket of a client address, of the fallback,
 * or of another route.
 *
 * @throws {ConfigError} listing every invalid option, with its path and code; an option name it
 * does not know (`identity.trustedProxy`) is one (`ERR_UNKNOWN_OPTION`), never ignored; neither
 * `limiter` nor `routes` is one too (`ERR_LIMITER`).
 * @example
 * const rl = createRateLimit({ limiter, identity: { trustedProxies: ['10.0.0.0/8'], secret } })
 * const verdict = await rl.check({ method: 'GET', path: '/', header: (n) => req.headers.get(n), peer })
 */
export function createRateLimit(options: RateLimitOptions): HttpRateLimit {
  const { run, stats } = createRateLimitCore(options)
  // A promise from `run` is passed on as it is.
  return { check: (request) => Promise.resolve(run(request)), stats }
}

/**
 * The adapters' view of `createRateLimit`: `run` is `check` answering synchronously (a verdict,
 * not a promise) when nothing has to wait — the memory store, a known client, no async callbacks.
 * It never throws: errors are rejected promises, as from `check`.
 */
export interface RateLimitCore {
  run(request: HttpRequest): HttpVerdict | Promise<HttpVerdict>
  readonly stats: HttpRateLimit['stats']
}

/**
 * Whether `run` answered with a promise rather than a verdict. A verdict is a plain object with an
 * `action`: reading it costs less than `instanceof Promise` on this hot path (under callgrind, the
 * Node adapter ran about 1,100 fewer instructions per request: 63.1 k → 62.0 k).
 */
export function pending(v: HttpVerdict | Promise<HttpVerdict>): v is Promise<HttpVerdict> {
  return (v as Partial<HttpVerdict>).action === undefined
}

/**
 * `createRateLimit`, with the synchronous entry the adapters use (not part of the public API).
 * `names`: the adapter's own option names (` peer`), allowed beside `RateLimitOptions`'. `json`
 * writes a denial's problem as its body, as `JSON.stringify` does: the Node-side adapters pass
 * `problemJson` (faster, and outside the edge bundle's budget).
 */
export function createRateLimitCore(
  options: RateLimitOptions,
  names = '',
  json: (problem: ProblemDetails) => string = JSON.stringify,
): RateLimitCore {
  const { standards, allow } = validateOptions(options, names)
  const target = (limiter: Limiter, cost: CostOption, where: string, route?: CompiledRoute): Target => ({
    limiter,
    sync: typeof limiter.limitSync === 'function',
    cost: typeof cost === 'number' ? Object.freeze({ cost }) : cost,
    where,
    render: headerRenderer(limiter.rules.map(quotaPolicy), standards),
    route,
  })
  const routes = (options.routes ?? []).map((r, i) => {
    const route: CompiledRoute = {
      ...r,
      // Express, Fastify and Hono answer HEAD with the GET handler.
      methods: r.methods?.includes('GET') ? [...r.methods, 'HEAD'] : r.methods,
      pattern: typeof r.path === 'string' ? pathGlob(r.path) : r.path,
      prefix: `r:${(r.name ?? String(r.path)).replace(/[%:]/g, encodeURIComponent)}:`,
    }
    return target(r.limiter, r.cost ?? options.cost ?? 1, `routes[${i}].cost`, route)
  })
  const defaultTarget = options.limiter && target(options.limiter, options.cost ?? 1, 'cost')
  const clock = options.clock ?? systemClock
  // Only the legacy fields carry a timestamp.
  const legacy = standards.includes('legacy')
  // `identity` was checked above, once: requests use it as it is, with no check of their own.
  const identity = options.identity ?? {}
  const trust = compileIdentity(identity)
  const secret = identity.secret
  const ipv4Prefix = identity.ipv4Prefix ?? 32
  const ipv6Prefix = identity.ipv6Prefix ?? 64
  const checkAddress = allow.hosts.size > 0 || allow.networks.length > 0
  const stats = { fallbackKeys: 0 }
  const { skip, onLimited } = options

  // `clientKey`, remembered per address: parsing and hashing are most of the work per request.
  // Keys are canonical addresses, or the raw peer text when only the peer counts; '' = allowed.
  const peerOnly = !trust.platform && trust.hops === 0 && trust.trusted.length === 0
  // `ClientKeyOptions.fallback`'s default: unknown-client.
  const fallbackKey = `ip:${identity.fallback ?? 'unknown-client'}`
  const known = new Map<string, string>()
  // Keeps at most KNOWN_ADDRESSES entries (remember() drops the oldest first).
  // `;pk=:…:` per store key, when `partitionKey` is on: hashed once per key, like addresses.
  const partitionKeys = new Map<string, string>()

  function addressKey(request: HttpRequest): string | undefined | Promise<string | undefined> {
    const peer = peerOnly ? request.peer : undefined
    if (peer !== undefined) {
      const key = known.get(peer)
      if (key !== undefined) return key === '' ? undefined : key
    }
    const ip = resolveWith(request, trust).ip
    if (ip === undefined) {
      stats.fallbackKeys++
      return fallbackKey
    }
    const key = known.get(ip)
    if (key !== undefined || isAllowed(allow, ip)) {
      const found = key ?? ''
      if (key === undefined) remember(known, ip, found, KNOWN_ADDRESSES)
      if (peer !== undefined && peer !== ip) remember(known, peer, found, KNOWN_ADDRESSES)
      return found === '' ? undefined : found
    }
    const address = parseIp(ip) as ParsedIp
    const subnet = subnetText(address, address.version === 4 ? ipv4Prefix : ipv6Prefix)
    return digest(subnet, secret).then((hash) => {
      const hashed = `ip:${base64url(hash)}`
      remember(known, ip, hashed, KNOWN_ADDRESSES)
      if (peer !== undefined && peer !== ip) remember(known, peer, hashed, KNOWN_ADDRESSES)
      return hashed
    })
  }

  function customKey(
    custom: unknown,
    request: HttpRequest,
  ): string | undefined | Promise<string | undefined> {
    // '' too: an empty header is no key, not one bucket (`k:`) for every client that sends one.
    if (custom === undefined || custom === null || custom === '') return addressKey(request)
    if (typeof custom !== 'string') {
      throw new EdgelimitError(
        'ERR_EDGELIMIT_KEY',
        `The key function returned ${describe(custom)}; expected a string, or undefined to use the client address`,
      )
    }
    if (allow.keys.has(custom)) return undefined
    if (checkAddress && isAllowed(allow, resolveWith(request, trust).ip)) return undefined
    // A client picks this key (an API key header): one over 128 characters is hashed, so that keys
    // of 16 KB each cannot fill the store's memory (`maxKeys` bounds the count, not the size).
    return custom.length > 128 ? digest(custom, secret).then((h) => `kh:${base64url(h)}`) : `k:${custom}`
  }

  // Each step goes on synchronously when it can, and through a promise when it must.
  function run(request: HttpRequest): HttpVerdict | Promise<HttpVerdict> {
    try {
      return skip ? after(skip(request), select, request) : select(0, request)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** The target of a request that `skip` (when given) did not skip. */
  function select(skipped: unknown, request: HttpRequest): HttpVerdict | Promise<HttpVerdict> {
    if (skipped) return PASS
    let t = defaultTarget
    if (routes.length > 0) {
      const { method, path } = request
      const routed = routePath(path)
      for (const r of routes) {
        const route = r.route as CompiledRoute
        if (
          route.pattern.test(route.pattern === route.path ? path : routed) &&
          (route.methods?.includes(method) ?? true)
        ) {
          t = r
          break
        }
      }
    }
    if (t === undefined) return PASS
    // The client address, or a key function's key (its `undefined` falls back to the address).
    const fn = t.route?.key ?? options.key
    return after(fn ? after(fn(request), customKey, request) : addressKey(request), charge, request, t)
  }

  function charge(
    client: string | undefined,
    request: HttpRequest,
    t: Target,
  ): HttpVerdict | Promise<HttpVerdict> {
    if (client === undefined) return PASS
    const key = t.route === undefined ? client : t.route.prefix + client
    if (typeof t.cost !== 'function') return decide(request, t, key, t.cost)
    return after(t.cost(request), costed, request, t, key)
  }

  function costed(
    cost: unknown,
    request: HttpRequest,
    t: Target,
    key: string,
  ): HttpVerdict | Promise<HttpVerdict> {
    return decide(request, t, key, { cost: checkedCost(cost, request, t.where) })
  }

  function decide(
    request: HttpRequest,
    t: Target,
    key: string,
    cost: { readonly cost: number },
  ): HttpVerdict | Promise<HttpVerdict> {
    if (t.sync) {
      try {
        return answer(request, t, key, t.limiter.limitSync(key, cost))
      } catch (error) {
        // By code, not class: a limiter from the other module system (ESM vs CJS) has its own class.
        if ((error as EdgelimitError | undefined)?.code !== 'ERR_EDGELIMIT_SYNC_UNSUPPORTED') throw error
        t.sync = false
      }
    }
    return t.limiter.limit(key, cost).then((decision) => answer(request, t, key, decision))
  }

  function answer(
    request: HttpRequest,
    t: Target,
    key: string,
    decision: Decision,
  ): HttpVerdict | Promise<HttpVerdict> {
    const pk = options.partitionKey ? partitionKeys.get(key) : ''
    if (pk !== undefined) return verdict(request, t, key, decision, pk)
    return digest(key, secret).then((bytes) => {
      const rendered = `;pk=${sfBinary(bytes.slice(0, 16))}`
      remember(partitionKeys, key, rendered, KNOWN_ADDRESSES)
      return verdict(request, t, key, decision, rendered)
    })
  }

  function verdict(
    request: HttpRequest,
    t: Target,
    key: string,
    decision: Decision,
    pk: string,
  ): HttpVerdict | Promise<HttpVerdict> {
    const headers = t.render(
      decision,
      legacy ? whole(clock.now(), 'clock.now()', 'ERR_EDGELIMIT_CLOCK') : 0,
      pk,
    )
    if (decision.allowed)
      return { action: 'continue', headers, delayMs: decision.delayMs ?? 0, decision, key }
    const problem = problemFor(decision, request.instance ?? request.path)
    const response: HttpAnswer = {
      status: problem.status,
      headers: [...headers, ['content-type', 'application/problem+json'], ['cache-control', 'no-store']],
      body: json(problem),
    }
    const limited = (custom: HttpAnswer | undefined): HttpVerdict => ({
      action: 'respond',
      headers,
      response: custom === undefined || custom === null ? response : checkedAnswer(custom, request),
      delayMs: 0,
      decision,
      key,
    })
    return after(onLimited?.({ request, decision, response }), limited)
  }

  return { run, stats }
}
