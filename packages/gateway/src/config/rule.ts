import {
  type AlgorithmSpec,
  algorithmSpec,
  ConfigError,
  type ConsistencyMode,
  createLimiter,
  type Limiter,
  type Policy,
  type StoreErrorMode,
} from 'edgelimit'
import { describe } from '../library.js'
import type { Checker } from './checker.js'
import { type Path, parsePath } from './issues.js'
import type { KeyPart, MatchConfig, PlanConfig, RuleConfig, TiersConfig } from './types.js'

export const ALGORITHMS = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-bucket',
  'gcra',
] as const
type AlgorithmName = (typeof ALGORITHMS)[number]

/** The parameters each algorithm takes (the library's option names; `shape: true` = leaky `mode: 'shape'`). */
export const PARAMS: Readonly<Record<AlgorithmName, readonly string[]>> = {
  'fixed-window': ['limit', 'window'],
  'sliding-log': ['limit', 'window'],
  'sliding-window': ['limit', 'window'],
  'token-bucket': ['capacity', 'refillRate', 'refillInterval'],
  'leaky-bucket': ['capacity', 'leakRate', 'leakInterval', 'shape'],
  gcra: ['limit', 'period', 'burst'],
}
const ALL_PARAMS = [...new Set(Object.values(PARAMS).flat())]

/** Settings a rule takes from `defaults` when it does not set them. */
export const DEFAULT_FIELDS = [
  'key',
  'cost',
  'onStoreError',
  'timeout',
  'mode',
  'enforce',
  'consistency',
  'syncInterval',
] as const
const RULE_FIELDS = ['name', 'match', 'algorithm', 'tiers', ...DEFAULT_FIELDS, ...ALL_PARAMS]

/** The settings of `defaults`, validated. */
export interface Defaults {
  readonly key: readonly KeyPart[]
  readonly cost: number
  readonly onStoreError: StoreErrorMode
  readonly timeout: number | false
  readonly mode: 'enforce' | 'shadow'
  readonly enforce: number
  readonly consistency: ConsistencyMode
  readonly syncIntervalMs: number
}

export const BUILT_IN_DEFAULTS: Defaults = {
  key: [{ kind: 'ip' }],
  cost: 1,
  onStoreError: 'closed',
  timeout: 45,
  mode: 'enforce',
  enforce: 100,
  consistency: 'strict',
  syncIntervalMs: 250,
}

// Rule names become header list members and store keys (`<rule>.<tier>`): keep them plain.
const RULE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$/
const TIER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const HOST = /^[A-Za-z0-9*]([A-Za-z0-9*.-]*[A-Za-z0-9*])?(:\d{1,5})?$/
const PATH = /^\/[\x21-\x7e]*$/
const SIMPLE_KEYS = ['ip', 'route', 'path', 'method', 'host', 'global'] as const

/**
 * Why a request can never have the header `name` (a valid token), or `undefined` when it can. Node
 * parses `__proto__` (in any case) but never sets it in `req.headers`: a key on it always falls
 * back, a condition on it never holds.
 *
 * @example unseenHeader('__PROTO__') // 'expected a header name a request can have; Node never …'
 */
export function unseenHeader(name: string): string | undefined {
  if (name.toLowerCase() !== '__proto__') return undefined
  return 'expected a header name a request can have; Node never passes a "__proto__" header on: a request never has it'
}

/** Validates `defaults` (or the settings of one rule over `base`). */
export function readDefaults(c: Checker, path: Path, o: Record<string, unknown>, base: Defaults): Defaults {
  const pick = <T>(name: string, read: (p: Path, v: unknown) => T | undefined, fallback: T): T => {
    if (o[name] === undefined) return fallback
    return read([...path, name], o[name]) ?? fallback
  }
  return {
    key: pick('key', (p, v) => readKey(c, p, v), base.key),
    cost: pick('cost', (p, v) => c.integer(p, v, 0, Number.MAX_SAFE_INTEGER), base.cost),
    onStoreError: pick(
      'onStoreError',
      (p, v) => c.choice(p, v, ['open', 'closed', 'local'] as const),
      base.onStoreError,
    ),
    timeout: pick('timeout', (p, v) => (v === false ? false : c.duration(p, v)), base.timeout),
    mode: pick('mode', (p, v) => c.choice(p, v, ['enforce', 'shadow'] as const), base.mode),
    enforce: pick(
      'enforce',
      (p, v) => {
        if (typeof v === 'number' && v >= 0 && v <= 100) return v
        c.add(p, 'ERR_PERCENT', `expected a percentage from 0 to 100, got ${describe(v)}`)
        return undefined
      },
      base.enforce,
    ),
    consistency: pick(
      'consistency',
      (p, v) => c.choice(p, v, ['strict', 'local', 'approximate'] as const),
      base.consistency,
    ),
    syncIntervalMs: pick('syncInterval', (p, v) => c.duration(p, v), base.syncIntervalMs),
  }
}

/**
 * Validates one entry of `rules`; `undefined` when it has problems (all of them reported).
 * `defaultCostAt` is where `defaults` sets the cost, if it does (a cost no plan admits is reported there).
 */
export function readRule(
  c: Checker,
  index: number,
  rule: unknown,
  defaults: Defaults,
  names: Set<string>,
  defaultCostAt?: Path,
): RuleConfig | undefined {
  const path: Path = ['rules', index]
  if (!c.object(path, rule)) return undefined
  const before = c.issues.length
  c.fields(path, rule, RULE_FIELDS)
  const name = rule.name === undefined ? missing(c, path, 'name') : c.string([...path, 'name'], rule.name)
  if (name !== undefined) {
    if (!RULE_NAME.test(name)) {
      c.add(
        [...path, 'name'],
        'ERR_RULE_NAME',
        `expected 1–48 letters, digits, "-" or "_" (it names headers and store keys), got ${describe(name)}`,
      )
    } else if (names.has(name))
      c.add([...path, 'name'], 'ERR_DUPLICATE_RULE', `rule name "${name}" is used twice`)
    else names.add(name)
  }
  const match = rule.match === undefined ? NO_MATCH : readMatch(c, [...path, 'match'], rule.match)
  const settings = readDefaults(c, path, rule, defaults)
  const algorithm =
    rule.algorithm === undefined ? missing(c, path, 'algorithm') : readAlgorithm(c, path, rule.algorithm)
  let plans: PlanConfig[] = []
  let tiers: TiersConfig | undefined
  if (algorithm !== undefined) {
    checkParams(c, path, rule, algorithm)
    const own = Object.fromEntries(ALL_PARAMS.filter((p) => rule[p] !== undefined).map((p) => [p, rule[p]]))
    if (rule.tiers === undefined) {
      plans = [{ tier: '', algorithm: spec(algorithm, own) }]
    } else {
      const read = readTiers(c, [...path, 'tiers'], rule.tiers, algorithm, own)
      tiers = read.tiers
      plans = read.plans
    }
    if (name !== undefined && RULE_NAME.test(name)) {
      const costAt = rule.cost !== undefined ? [...path, 'cost'] : (defaultCostAt ?? path)
      for (const plan of plans) {
        const limiter = checkPlan(c, path, name, plan, own)
        if (limiter !== undefined) checkCost(c, costAt, name, plan, limiter, settings.cost)
      }
    }
  }
  if (c.issues.length > before || name === undefined || algorithm === undefined || match === undefined)
    return undefined
  return {
    name,
    match,
    key: settings.key,
    cost: settings.cost,
    plans,
    tiers,
    onStoreError: settings.onStoreError,
    timeout: settings.timeout,
    mode: settings.mode,
    enforce: settings.enforce,
    consistency: settings.consistency,
    syncIntervalMs: settings.syncIntervalMs,
  }
}

const NO_MATCH: MatchConfig = { hosts: [], paths: [], methods: [], headers: [] }

function missing(c: Checker, path: Path, field: string): undefined {
  c.add([...path, field], 'ERR_REQUIRED', `the field "${field}" is required`)
  return undefined
}

function readAlgorithm(c: Checker, path: Path, value: unknown): AlgorithmName | undefined {
  if ((ALGORITHMS as readonly unknown[]).includes(value)) return value as AlgorithmName
  c.add(
    [...path, 'algorithm'],
    'ERR_UNKNOWN_ALGORITHM',
    `expected one of ${ALGORITHMS.join(', ')}, got ${describe(value)}`,
  )
  return undefined
}

/** Reports parameters of other algorithms (unknown fields are reported by `fields`). */
function checkParams(c: Checker, path: Path, o: Record<string, unknown>, algorithm: AlgorithmName): void {
  if (o.shape !== undefined && algorithm === 'leaky-bucket') c.boolean([...path, 'shape'], o.shape)
  for (const name of Object.keys(o)) {
    if (PARAMS[algorithm].includes(name) || !ALL_PARAMS.includes(name)) continue
    c.add(
      [...path, name],
      'ERR_PARAM',
      `"${name}" is not a parameter of ${algorithm} (it takes ${PARAMS[algorithm].join(', ')})`,
      'key',
    )
  }
}

/**
 * The library's spec for the algorithm's own parameters: another algorithm's was reported
 * (`ERR_PARAM`), and the library refuses a name it does not know.
 */
function spec(algorithm: AlgorithmName, params: Record<string, unknown>): AlgorithmSpec {
  const options: Record<string, unknown> = Object.fromEntries(
    Object.entries(params).filter(([name]) => name !== 'shape' && PARAMS[algorithm].includes(name)),
  )
  if (algorithm === 'leaky-bucket') options.mode = params.shape === true ? 'shape' : 'police'
  return algorithmSpec({ algorithm, options })
}

function readTiers(
  c: Checker,
  path: Path,
  value: unknown,
  algorithm: AlgorithmName,
  own: Record<string, unknown>,
): { tiers: TiersConfig | undefined; plans: PlanConfig[] } {
  if (!c.object(path, value)) return { tiers: undefined, plans: [] }
  c.fields(path, value, ['header', 'keys', 'default', 'plans'])
  const plans: PlanConfig[] = []
  if (value.plans === undefined) missing(c, path, 'plans')
  else if (c.object([...path, 'plans'], value.plans)) {
    if (Object.keys(value.plans).length === 0)
      c.add([...path, 'plans'], 'ERR_TIER', 'expected at least one plan')
    for (const [tier, params] of Object.entries(value.plans)) {
      const at = [...path, 'plans', tier]
      if (!TIER_NAME.test(tier)) {
        c.add(
          at,
          'ERR_TIER',
          `expected a tier name of letters, digits, "-" or "_", got ${describe(tier)}`,
          'key',
        )
      }
      if (!c.object(at, params)) continue
      c.fields(at, params, ALL_PARAMS)
      checkParams(c, at, params, algorithm)
      plans.push({ tier, algorithm: spec(algorithm, { ...own, ...params }) })
    }
  }
  const known = new Set(plans.map((p) => p.tier))
  const tierName = (at: Path, v: unknown): string | undefined => {
    const s = c.string(at, v)
    if (s !== undefined && !known.has(s) && plans.length > 0) {
      c.add(at, 'ERR_TIER', `"${s}" is not one of the plans (${[...known].join(', ')})`)
      return undefined
    }
    return s
  }
  const header = value.header === undefined ? undefined : readHeaderName(c, [...path, 'header'], value.header)
  const keys = new Map<string, string>()
  if (value.keys !== undefined && c.object([...path, 'keys'], value.keys)) {
    for (const [k, tier] of Object.entries(value.keys)) {
      const t = tierName([...path, 'keys', k], tier)
      if (t !== undefined) keys.set(k, t)
    }
  }
  if (value.header === undefined && value.keys === undefined) {
    c.add(
      path,
      'ERR_TIER',
      'choose the tier by `header` (a request header) or `keys` (key value → plan), or both',
    )
  }
  const fallback =
    value.default === undefined ? missing(c, path, 'default') : tierName([...path, 'default'], value.default)
  return { tiers: fallback === undefined ? undefined : { header, keys, default: fallback }, plans }
}

/**
 * The library validates the algorithm's parameters: one source of truth for their bounds. Returns
 * the plan's limiter (memory store, a clock fixed at 0) when they are valid.
 */
function checkPlan(
  c: Checker,
  path: Path,
  name: string,
  plan: PlanConfig,
  own: Record<string, unknown>,
): Limiter | undefined {
  try {
    return createLimiter({
      rules: [{ name: plan.tier === '' ? name : `${name}.${plan.tier}`, algorithm: plan.algorithm }],
      clock: { now: () => 0 },
    })
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    const written = plan.algorithm.options
    const paramOf = (p: string) => parsePath(p)[3]
    const onWritten = error.issues.some((i) => String(paramOf(i.path)) in written)
    for (const issue of error.issues) {
      const segments = parsePath(issue.path)
      // rules[0].algorithm.<param>: the param where it was written (the plan overrides the rule).
      const param = segments[3] === undefined ? undefined : String(segments[3])
      const shown = param === 'mode' ? 'shape' : param
      let at: Path = path
      let { code, message } = issue
      if (shown !== undefined) {
        at =
          plan.tier !== '' && !(shown in own)
            ? [...path, 'tiers', 'plans', plan.tier, shown]
            : [...path, shown]
        if (param !== undefined && !(param in written)) {
          // A parameter not written: required, or a default derived from an invalid one (gcra burst).
          if (onWritten) continue
          code = 'ERR_REQUIRED'
          message = `the parameter "${shown}" is required by ${plan.algorithm.algorithm}`
          at = plan.tier === '' ? [...path, shown] : [...path, 'tiers', 'plans', plan.tier, shown]
        }
      }
      if (!c.issues.some((i) => i.code === code && samePath(i.path, at))) c.add(at, code, message)
    }
    return undefined
  }
}

const NEVER = 'ERR_COST_NEVER_ADMITTED'

/**
 * Refuses a cost the plan can never admit: every request the rule matches would be denied for ever
 * (and, behind another rule, told to retry after that rule's wait). The library's own answer
 * decides it: a fresh key asked for the cost once denies with `cost-exceeds-limit`.
 */
function checkCost(
  c: Checker,
  at: Path,
  name: string,
  plan: PlanConfig,
  limiter: Limiter,
  cost: number,
): void {
  // An invalid cost was reported where it was written (and replaced by the default).
  if (cost === 0 || c.issues.some((i) => samePath(i.path, at) && i.code !== NEVER)) return
  const decision = limiter.limitSync('cost-check', { cost })
  if (decision.reason !== 'cost-exceeds-limit') return
  const policy = limiter.rules[0]?.policy as Policy
  const { bound, raise } = boundOf(policy)
  const rule = plan.tier === '' ? `"${name}"` : `"${name}" tier "${plan.tier}"`
  c.add(
    at,
    NEVER,
    `${cost} can never pass rule ${rule} (${bound} admits at most ${decision.limit} per request); lower the cost or raise the ${raise}`,
  )
}

/** The parameter that bounds what one request of a policy may cost, as the policy file names it. */
function boundOf(policy: Policy): { bound: string; raise: string } {
  switch (policy.algorithm) {
    case 'fixed-window':
    case 'sliding-log':
    case 'sliding-window':
      return { bound: `${policy.algorithm} limit ${policy.limit}`, raise: 'limit' }
    case 'token-bucket':
      return { bound: `token-bucket capacity ${policy.capacity}`, raise: 'capacity' }
    case 'leaky-bucket':
      return {
        bound: `${policy.mode === 'shape' ? 'shaping ' : ''}leaky-bucket capacity ${policy.capacity}`,
        raise: 'capacity',
      }
    case 'gcra':
      return { bound: `gcra burst ${policy.burst}`, raise: 'burst' }
  }
}

function samePath(a: Path, b: Path): boolean {
  return a.length === b.length && a.every((s, i) => s === b[i])
}

function readHeaderName(c: Checker, path: Path, value: unknown): string | undefined {
  if (typeof value !== 'string' || !TOKEN.test(value))
    c.add(path, 'ERR_HEADER', `expected a header name like "x-api-key", got ${describe(value)}`)
  else if (unseenHeader(value) !== undefined) c.add(path, 'ERR_HEADER', unseenHeader(value) as string)
  else return value.toLowerCase()
  return undefined
}

/** `ip`, `header:<name>`, `query:<name>`, `route`, `path`, `method`, `host`, `global`, or a list of them. */
export function readKey(c: Checker, path: Path, value: unknown): KeyPart[] | undefined {
  const list = c.list(path, value)
  if (list === undefined) return undefined
  if (list.length === 0) {
    c.add(path, 'ERR_KEY', 'expected at least one key part, like ip or header:x-api-key')
    return undefined
  }
  const parts: KeyPart[] = []
  let ok = true
  list.forEach((item, i) => {
    const at = Array.isArray(value) ? [...path, i] : path
    const text = typeof item === 'string' ? item.trim() : ''
    const m = /^(header|query):(.+)$/.exec(text)
    const unseen = m?.[1] === 'header' ? unseenHeader(m[2] as string) : undefined
    if ((SIMPLE_KEYS as readonly string[]).includes(text))
      parts.push({ kind: text as (typeof SIMPLE_KEYS)[number] })
    else if (unseen !== undefined) {
      ok = false
      c.add(at, 'ERR_KEY', `${unseen}, and the key would always fall back to the address`)
    } else if (m?.[1] === 'header' && TOKEN.test(m[2] as string))
      parts.push({ kind: 'header', name: (m[2] as string).toLowerCase() })
    else if (m?.[1] === 'query') parts.push({ kind: 'query', name: m[2] as string })
    else {
      ok = false
      c.add(
        at,
        'ERR_KEY',
        `expected ${SIMPLE_KEYS.join(', ')}, header:<name> or query:<name>, got ${describe(item)}`,
      )
    }
  })
  return ok ? parts : undefined
}

function readMatch(c: Checker, path: Path, value: unknown): MatchConfig | undefined {
  if (!c.object(path, value)) return undefined
  const before = c.issues.length
  c.fields(path, value, ['host', 'path', 'methods', 'headers'])
  const strings = (field: string, pattern: RegExp, code: string, expected: string): string[] => {
    if (value[field] === undefined) return []
    const list = c.list([...path, field], value[field]) ?? []
    // An empty list would be no condition at all: the rule would match every request.
    if (list.length === 0)
      c.add([...path, field], code, `expected at least one ${expected.replace(/^an? /, '')}, got []`)
    return list.flatMap((item, i) => {
      const at = Array.isArray(value[field]) ? [...path, field, i] : [...path, field]
      if (typeof item === 'string' && pattern.test(item)) return [item]
      c.add(at, code, `expected ${expected}, got ${describe(item)}`)
      return []
    })
  }
  const hosts = strings(
    'host',
    HOST,
    'ERR_HOST',
    'a host name or glob like "api.example.com" or "*.example.com"',
  )
  const paths = strings('path', PATH, 'ERR_PATH', 'a path or glob starting with "/", like "/api/**"')
  const methods = strings('methods', TOKEN, 'ERR_METHOD', 'an HTTP method like "GET"').map((m) =>
    m.toUpperCase(),
  )
  const headers: [string, string | boolean][] = []
  if (value.headers !== undefined && c.object([...path, 'headers'], value.headers)) {
    for (const [name, expected] of Object.entries(value.headers)) {
      const at = [...path, 'headers', name]
      if (!TOKEN.test(name))
        c.add(at, 'ERR_HEADER', `expected a header name like "x-api-key", got ${describe(name)}`, 'key')
      else if (unseenHeader(name) !== undefined) c.add(at, 'ERR_HEADER', unseenHeader(name) as string, 'key')
      else if (typeof expected === 'string' || typeof expected === 'boolean')
        headers.push([name.toLowerCase(), expected])
      else
        c.add(
          at,
          'ERR_STRING',
          `expected a value glob (string), true (present) or false (absent), got ${describe(expected)}`,
        )
    }
  }
  if (c.issues.length > before) return undefined
  return { hosts: hosts.map((h) => h.toLowerCase()), paths, methods, headers }
}
