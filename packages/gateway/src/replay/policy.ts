import { type AlgorithmSpec, createLimiter, type Policy, type StoreRule } from 'edgelimit'
import { PolicyError } from '../config/issues.js'
import type { GatewayConfig, KeyPart, RuleConfig, StoreConfig } from '../config/types.js'
import { loadPolicy as loadGatewayPolicy, validatePolicy } from '../config/validate.js'
import { type ClientKeyOptions, enforcedFor, resolveClientIp, subnetKey } from '../library.js'
import { createHasher, type Hasher, trustsSomePeer } from '../policy/key.js'
import { compileMatch } from '../policy/match.js'
import { memo } from '../policy/memo.js'
import { canonicalPath, hostForm, routeForm } from '../policy/path.js'
import type { RequestInfo } from '../policy/request.js'
import { headerOf, type LogRecord } from './record.js'

export { PolicyError } from '../config/issues.js'

/** One set of parameters of a rule (one per tier). */
export interface PolicyPlan extends StoreRule {
  readonly tier: string
  /** `<rule>` or `<rule>.<tier>`, as the gateway names its limiter. */
  readonly name: string
  readonly algorithm: AlgorithmSpec
  /** The validated policy (what the store evaluates). */
  readonly policy: Policy
  /** The limit and window it stands for: the exact sliding log it is compared with. */
  readonly nominal: { readonly limit: number; readonly windowMs: number }
}

/**
 * A rule of a gateway policy (`edgelimit.yaml`) as `replay` and `simulate` evaluate it over log
 * records: the gateway's own matching, keys by the same parts (raw values instead of hashes,
 * which counts alike and stays readable), tiers by key value, header or default.
 */
export interface PolicyRule {
  readonly name: string
  /** The key parts as written: `ip`, `header:x-api-key`, … */
  readonly key: readonly string[]
  readonly cost: number
  /** `mode: shadow` in the policy. */
  readonly shadow: boolean
  /** `enforce` in the policy: the percentage of keys the rule blocks when not in shadow. */
  readonly enforce: number
  readonly plans: readonly PolicyPlan[]
  /** Whether the rule applies to every request (no `match`). */
  readonly matchesAll: boolean
  /** The route (matched path pattern, `*` without one) when the rule applies, else undefined. */
  match(r: LogRecord): string | undefined
  /** The request's key for this rule. */
  keyOf(r: LogRecord, route: string): string
  /** Index into `plans` for a request with `key`. */
  planOf(r: LogRecord, key: string): number
  /**
   * Whether the request's key falls in the rule's `enforce` share, as the gateway's limiter (plan
   * `plan`) decides it: by the store key the gateway derives, the HMAC of the key parts under
   * `identity.secret`. Outside it, a denial is a shadow denial.
   */
  enforces(r: LogRecord, route: string, plan: number): boolean
  /** For a rule keyed by `ip` alone: the key of a client address (IPv6 grouped as configured). */
  readonly clientKey: ((ip: string) => string) | undefined
  /**
   * The key parts a request may lack (`header:`, `query:`, `host`): then the rule keys it by
   * client, `FALLBACK` + address, as the gateway does. Empty for keys every request has.
   */
  readonly mayLack: readonly string[]
  /** Fields of a log line the rule reads beyond the defaults. */
  readonly needs: { readonly ua: boolean; readonly query: boolean }
  /**
   * What the rule reads of a request beyond its address, path and method (key, `match`, tier
   * header), as the policy names it: `host`, `header:<name>`, `query:<name>`.
   */
  readonly reads: readonly string[]
}

/**
 * Reads a gateway policy file (YAML or JSON) with the gateway's own loader.
 * @throws {PolicyError} listing every problem with its file, line and path.
 */
export function loadPolicy(file: string): PolicyRule[] {
  return compilePolicy(loadGatewayPolicy(file).config)
}

/** Keys held per rule when neither the policy's store nor `--max-keys` bounds them. */
export const REPLAY_MAX_KEYS = 1_000_000

/**
 * Keys held per rule as `serve` holds them: a memory store's `maxKeys` (one limiter per rule and
 * tier, each bounded by it, least recently used evicted beyond). A Redis or Upstash store has no
 * bound of its own: `REPLAY_MAX_KEYS`, the replay's memory bound.
 *
 * @example keysHeld({ type: 'memory', maxKeys: 50_000 }) // 50_000
 */
export function keysHeld(store: StoreConfig): number {
  return store.type === 'memory' ? store.maxKeys : REPLAY_MAX_KEYS
}

/**
 * Validates rules written as in a policy file's `rules:` list.
 * @example policyFromRules([{ name: 'login', algorithm: 'sliding-window', limit: 5, window: '1m' }])
 */
export function policyFromRules(rules: readonly unknown[], identity?: unknown): PolicyRule[] {
  const { config, issues } = validatePolicy(identity === undefined ? { rules } : { rules, identity })
  if (config === undefined) throw new PolicyError(issues)
  return compilePolicy(config)
}

/** The rules of a validated gateway configuration. */
export function compilePolicy(config: GatewayConfig): PolicyRule[] {
  const hasher = createHasher(config.identity.secret)
  return config.rules.map((rule) => compileRule(rule, config.identity, hasher))
}

function compileRule(rule: RuleConfig, identity: ClientKeyOptions, hasher: Hasher): PolicyRule {
  const plans = rule.plans.map((plan): PolicyPlan => {
    const name = plan.tier === '' ? rule.name : `${rule.name}.${plan.tier}`
    const { policy, compiled } = createLimiter({ rules: [{ name, algorithm: plan.algorithm }] })
      .rules[0] as StoreRule
    return { tier: plan.tier, name, algorithm: plan.algorithm, policy, compiled, nominal: nominal(policy) }
  })
  const matcher = compileMatch(rule.match)
  const request = requestView()
  const client = clientKey(identity)
  const clientOf = recordClient(identity, client)
  const parts = rule.key.map((p) => keyPart(p, clientOf))
  const names = rule.key.map((p) => ('name' in p ? `${p.kind}:${p.name}` : p.kind))
  const tiers = rule.tiers
  const planIndex = new Map(plans.map((p, i) => [p.tier, i]))
  const defaultPlan = tiers === undefined ? 0 : (planIndex.get(tiers.default) ?? 0)
  const matchesAll =
    rule.match.paths.length +
      rule.match.methods.length +
      rule.match.hosts.length +
      rule.match.headers.length ===
    0
  return {
    name: rule.name,
    key: names,
    cost: rule.cost,
    shadow: rule.mode === 'shadow',
    enforce: rule.enforce,
    plans,
    matchesAll,
    clientKey: rule.key.length === 1 && rule.key[0]?.kind === 'ip' ? client : undefined,
    match: matchesAll ? () => '*' : (r) => matcher(request.of(r)),
    keyOf(r, route) {
      if (parts.length === 1) return (parts[0] as KeyFn)(r, route) ?? fallback(r)
      let key = ''
      for (let i = 0; i < parts.length; i++) {
        const v = (parts[i] as KeyFn)(r, route)
        if (v === undefined) return fallback(r)
        key = i === 0 ? v : `${key}|${v}`
      }
      return key
    },
    planOf:
      tiers === undefined
        ? () => 0
        : (r, key) => {
            const raw = key.startsWith(FALLBACK) ? '' : key
            const named =
              (raw === '' ? undefined : tiers.keys.get(raw)) ??
              (tiers.header === undefined ? undefined : headerOf(r, tiers.header)?.trim())
            return (named === undefined ? undefined : planIndex.get(named)) ?? defaultPlan
          },
    enforces:
      rule.enforce >= 100 || rule.enforce <= 0
        ? () => rule.enforce >= 100
        : (r, route, plan) => enforcedFor((plans[plan] as PolicyPlan).name, storeKey(r, route), rule.enforce),
    mayLack: lackableParts(names),
    needs: {
      ua:
        rule.key.some((p) => p.kind === 'header' && p.name === 'user-agent') ||
        tiers?.header === 'user-agent' ||
        rule.match.headers.some(([h]) => h === 'user-agent'),
      query: rule.key.some((p) => p.kind === 'query'),
    },
    reads: [
      ...new Set([
        ...names.filter((n) => n === 'host' || n.startsWith('header:') || n.startsWith('query:')),
        ...(rule.match.hosts.length > 0 ? ['host'] : []),
        ...rule.match.headers.map(([h]) => `header:${h}`),
        ...(tiers?.header === undefined ? [] : [`header:${tiers.header}`]),
      ]),
    ],
  }

  function fallback(r: LogRecord): string {
    return `${FALLBACK}${clientOf(r)}`
  }

  /** The key the gateway passes its limiter: `name=value` parts (or the fallback), hashed. */
  function storeKey(r: LogRecord, route: string): string {
    let descriptor = ''
    for (let i = 0; i < parts.length; i++) {
      const v = (parts[i] as KeyFn)(r, route)
      if (v === undefined || v === '') return hasher.hash(fallback(r))
      descriptor += `${i === 0 ? '' : '|'}${names[i]}=${encodeURIComponent(v)}`
    }
    return hasher.hash(descriptor)
  }
}

/**
 * The parts of a key, as the policy names them, that a request may lack (`host`, `header:<name>`,
 * `query:<name>`): `PolicyRule.mayLack`, and what the report names when requests lacked them.
 */
export function lackableParts(names: readonly string[]): string[] {
  return names.filter((n) => n === 'host' || n.startsWith('header:') || n.startsWith('query:'))
}

/** A missing header or query parameter keys the request by client, in a namespace of its own (as the gateway does). */
export const FALLBACK = 'fallback|ip='

type KeyFn = (r: LogRecord, route: string) => string | undefined

function keyPart(part: KeyPart, clientOf: (r: LogRecord) => string): KeyFn {
  switch (part.kind) {
    case 'ip':
      return clientOf
    case 'route':
      return (_, route) => route
    case 'path':
      return (r) => routeOf(r.path)
    case 'method':
      return (r) => r.method
    case 'host':
      return (r) => (r.host === '' ? undefined : hostForm(r.host))
    case 'global':
      return () => '*'
    case 'header': {
      const name = part.name
      return (r) => headerOf(r, name)
    }
    case 'query': {
      const name = part.name
      return (r) => queryValue(r.query, name)
    }
  }
}

/**
 * The client key of an address as the gateway groups it (IPv6 by its `/64` by default, IPv4
 * whole unless `ipv4Prefix` says otherwise). The log's address is taken as the client's; an
 * address that does not parse (a host name) is its own key.
 */
function clientKey(identity: ClientKeyOptions): (ip: string) => string {
  const ipv4Whole = (identity.ipv4Prefix ?? 32) === 32
  const cache = memo<string>()
  return (ip) => {
    // IPv4 kept whole is its own key (a host name too: it does not parse either way).
    if (ipv4Whole && !ip.includes(':')) return ip
    let key = cache.get(ip)
    if (key === undefined) {
      key = subnetKey(ip, identity) ?? ip
      cache.set(ip, key)
    }
    return key
  }
}

/**
 * The client of a log record as the gateway resolves a request's: behind trusted proxies (or a
 * hop count, or `trustPlatform`), the forwarding header a JSON line logged (nginx's
 * `http_x_forwarded_for`, `headers.x-forwarded-for`), read with the gateway's own trust; else the
 * logged address. Access-log lines carry no such header: their address is the client's.
 */
function recordClient(identity: ClientKeyOptions, client: (ip: string) => string): (r: LogRecord) => string {
  if (!trustsSomePeer(identity)) return (r) => client(r.ip)
  const header = (r: LogRecord) => (name: string) => {
    const v = headerOf(r, name)
    // nginx writes an absent header as `-`: the request had none.
    return v === '-' ? undefined : v
  }
  return (r) => {
    if (r.json === undefined) return client(r.ip)
    const { ip, source } = resolveClientIp({ peer: r.ip, header: header(r) }, identity)
    // From the peer (untrusted, or no header): the logged address, as before.
    if (source === 'peer') return client(r.ip)
    return ip === undefined ? (identity.fallback ?? 'unknown-client') : client(ip)
  }
}

function queryValue(query: string, name: string): string | undefined {
  if (query === '') return undefined
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=')
    const k = eq === -1 ? pair : pair.slice(0, eq)
    if (decode(k) === name) {
      const v = decode(eq === -1 ? '' : pair.slice(eq + 1))
      return v === '' ? undefined : v
    }
  }
  return undefined
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return text
  }
}

const routes = memo<string>(100_000)

/**
 * A logged path as the gateway's rules would see it: canonical, then in route form. Logs hold
 * few distinct paths, so each is worked out once.
 */
function routeOf(path: string): string {
  let route = routes.get(path)
  if (route === undefined) {
    route = routeForm(canonicalPath(path) ?? path)
    routes.set(path, route)
  }
  return route
}

/** A reusable view of a log record as the gateway's matchers read a request. */
function requestView() {
  let current: LogRecord | undefined
  const view: RequestInfo & { of(r: LogRecord): RequestInfo } = {
    get method() {
      return (current as LogRecord).method
    },
    get path() {
      return (current as LogRecord).path
    },
    get routePath() {
      return routeOf((current as LogRecord).path)
    },
    get query() {
      return (current as LogRecord).query
    },
    get host() {
      return hostForm((current as LogRecord).host)
    },
    get peer() {
      return (current as LogRecord).ip
    },
    header: (name) => headerOf(current as LogRecord, name),
    of(r) {
      current = r
      return view
    },
  }
  return view
}

/**
 * The limit and window a policy stands for (the exact sliding log it is compared with): for the
 * buckets and GCRA, the largest burst and the time to refill it.
 */
export function nominal(p: Policy): { limit: number; windowMs: number } {
  switch (p.algorithm) {
    case 'fixed-window':
    case 'sliding-log':
    case 'sliding-window':
      return { limit: p.limit, windowMs: p.windowMs }
    case 'token-bucket':
      return {
        limit: p.capacity,
        windowMs: Math.max(1, Math.round((p.capacity * p.refillIntervalMs) / p.refillRate)),
      }
    case 'leaky-bucket': {
      const limit = Math.max(1, p.capacity)
      return { limit, windowMs: Math.max(1, Math.round((limit * p.leakIntervalMs) / p.leakRate)) }
    }
    case 'gcra':
      // Its largest burst and the time to earn it back (T = period / limit per request).
      return { limit: p.burst, windowMs: Math.max(1, Math.round((p.burst * p.periodMs) / p.limit)) }
  }
}
