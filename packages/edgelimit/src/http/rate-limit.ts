import { systemClock } from '../clock.js'
import { ConfigError } from '../errors.js'
import type { Decision, Limiter } from '../limiter.js'
import { type HeaderStandard, type QuotaPolicy, quotaPolicy, rateLimitHeaders } from './headers.js'
import { type ClientKeyOptions, clientKey, partitionKeyBytes, validateClientKeyOptions } from './identity.js'
import { problemFor } from './problem.js'

/** What every adapter hands the HTTP layer: runtime differences end here. */
export interface HttpRequest {
  readonly method: string
  /** The URL path, without the query. */
  readonly path: string
  header(name: string): string | null | undefined
  /** The direct peer's address (the socket), when the runtime has one. */
  readonly peer?: string | undefined
}

/** A key function: API key, user id, header… `undefined` falls back to the client address. */
export type KeyFunction = (request: HttpRequest) => string | undefined | Promise<string | undefined>

/** A limiter applied to matching requests only. */
export interface RouteRule {
  /** Exact path, a glob (`/api/*`, `/files/**`) or a RegExp. */
  path: string | RegExp
  /** Upper-case methods; all when omitted. */
  methods?: readonly string[]
  limiter: Limiter
  /** Shards keys by route (`<name>:<client>`). @default the path pattern */
  name?: string
  cost?: number | ((request: HttpRequest) => number | Promise<number>)
  key?: KeyFunction
}

/** An HTTP answer, framework-neutral. */
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
  /** The key the request was counted under (hashed unless a key function chose it). */
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
  /** Units a request costs. @default 1 */
  cost?: number | ((request: HttpRequest) => number | Promise<number>)
  /** Requests that bypass the limiter entirely (no headers). */
  skip?: (request: HttpRequest) => boolean | Promise<boolean>
  /** Client keys or addresses that are never limited. */
  allowList?: readonly string[]
  /** Header fields to emit, or `false` for none. @default 'draft-10' */
  headers?: HeaderStandard | readonly HeaderStandard[] | false
  /**
   * Adds `pk` (the client's partition key, HMAC-hashed under `identity.secret`, never raw) to the
   * draft-10 fields. @default false
   */
  partitionKey?: boolean
  /** Replaces the 429/503 answer. Return nothing to keep the default. */
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

function globToRegExp(glob: string): RegExp {
  const body = glob
    .split(/(\*\*|\*)/)
    .map((part) =>
      part === '**' ? '.*' : part === '*' ? '[^/]*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('')
  return new RegExp(`^${body}$`)
}

interface CompiledRoute extends RouteRule {
  readonly pattern: RegExp
  readonly shard: string
  readonly policies: readonly QuotaPolicy[]
}

const STANDARDS: readonly HeaderStandard[] = ['draft-10', 'draft-7', 'draft-6', 'legacy']

// Checked when the middleware is created, not on the first request: a bad identity option would
// otherwise fail every request, and draft-10/7/6 would emit clashing RateLimit(-Policy) fields.
function validateOptions(identity: unknown, standards: readonly HeaderStandard[]): void {
  const issues = identity === undefined ? [] : validateClientKeyOptions(identity, 'identity')
  for (const standard of standards) {
    if (!STANDARDS.includes(standard)) {
      issues.push({
        path: 'headers',
        code: 'ERR_HEADER_STANDARD',
        message: `expected one of ${STANDARDS.join(', ')}, got ${JSON.stringify(standard)}`,
      })
    }
  }
  const drafts = standards.filter((s) => s !== 'legacy')
  if (new Set(drafts).size > 1) {
    issues.push({
      path: 'headers',
      code: 'ERR_HEADER_CONFLICT',
      message: `${[...new Set(drafts)].join(', ')} emit clashing RateLimit fields; choose one (legacy may be added)`,
    })
  }
  if (issues.length > 0) throw new ConfigError(issues)
}

/**
 * The behaviour every adapter shares: pick the route's limiter, derive a key that cannot be
 * spoofed, charge the cost, and answer with the standard headers on every response and a
 * problem+json 429 (or 503 when the store is down under fail-closed).
 *
 * @example
 * const rl = createRateLimit({ limiter, identity: { trustedProxies: ['10.0.0.0/8'], secret } })
 * const verdict = await rl.check({ method: 'GET', path: '/', header: (n) => req.headers.get(n), peer })
 */
export function createRateLimit(options: RateLimitOptions): HttpRateLimit {
  if (options.limiter === undefined && (options.routes?.length ?? 0) === 0) {
    throw new TypeError('Expected `limiter` or at least one of `routes`')
  }
  const standards: readonly HeaderStandard[] =
    options.headers === false
      ? []
      : typeof options.headers === 'string'
        ? [options.headers]
        : (options.headers ?? ['draft-10'])
  validateOptions(options.identity, standards)
  const routes: CompiledRoute[] = (options.routes ?? []).map((r) => ({
    ...r,
    pattern: typeof r.path === 'string' ? globToRegExp(r.path) : r.path,
    shard: r.name ?? String(r.path),
    policies: r.limiter.rules.map(quotaPolicy),
  }))
  const defaultPolicies = options.limiter?.rules.map(quotaPolicy) ?? []
  const allow = new Set(options.allowList ?? [])
  const stats = { fallbackKeys: 0 }

  async function check(request: HttpRequest): Promise<HttpVerdict> {
    if (options.skip !== undefined && (await options.skip(request))) return PASS
    const route = routes.find(
      (r) => r.pattern.test(request.path) && (r.methods?.includes(request.method) ?? true),
    )
    const limiter = route?.limiter ?? options.limiter
    if (limiter === undefined) return PASS
    const keyFn = route?.key ?? options.key
    const custom = keyFn === undefined ? undefined : await keyFn(request)
    let key = custom
    if (key === undefined) {
      const client = await clientKey(
        { peer: request.peer, header: (n) => request.header(n) },
        options.identity,
      )
      if (client.fallback) stats.fallbackKeys++
      if (client.ip !== undefined && allow.has(client.ip)) return PASS
      key = client.key
    }
    if (allow.has(key)) return PASS
    if (route !== undefined) key = `${route.shard}:${key}`
    const costOption = route?.cost ?? options.cost ?? 1
    const cost = typeof costOption === 'number' ? costOption : await costOption(request)
    const decision = await limiter.limit(key, { cost })
    const partitionKey = options.partitionKey
      ? await partitionKeyBytes(key, options.identity?.secret)
      : undefined
    const headers = rateLimitHeaders(decision, route?.policies ?? defaultPolicies, {
      standards,
      nowMs: systemClock.now(),
      ...(partitionKey !== undefined ? { partitionKey } : {}),
    })
    if (decision.allowed)
      return { action: 'continue', headers, delayMs: decision.delayMs ?? 0, decision, key }
    const problem = problemFor(decision, request.path)
    let response: HttpAnswer = {
      status: problem.status,
      headers: [...headers, ['Content-Type', 'application/problem+json'], ['Cache-Control', 'no-store']],
      body: JSON.stringify(problem),
    }
    if (options.onLimited !== undefined)
      response = (await options.onLimited({ request, decision, response })) ?? response
    return { action: 'respond', headers, response, delayMs: 0, decision, key }
  }

  return { check, stats }
}
