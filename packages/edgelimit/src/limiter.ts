import { type AlgorithmSpec, toPolicy } from './algorithms.js'
import { type Clock, systemClock } from './clock.js'
import type { DenyReason } from './core/types.js'
import { ConfigError, describe, EdgelimitError } from './errors.js'
import { memoryStore } from './stores/memory.js'
import type { BoundRules, RuleVerdict, Store, StoreRule } from './stores/types.js'
import { createIssues } from './validate.js'

/** A named rule: one algorithm applied to every key of the limiter. */
export interface Rule {
  /** Unique within the limiter; printable ASCII (it appears in headers and store keys). */
  name: string
  algorithm: AlgorithmSpec
}

/** Options of `createLimiter`. */
export interface LimiterOptions {
  /** One or more rules; a request is admitted only if every rule admits it. */
  rules: readonly Rule[]
  /** @default memoryStore() */
  store?: Store
  /** @default the system clock */
  clock?: Clock
}

/** One rule's part of a decision. */
export interface RuleDecision {
  readonly name: string
  /** Whether this rule admits the request (it is charged only if every rule admits it). */
  readonly allowed: boolean
  readonly limit: number
  /** Further cost-1 requests this rule would admit right now. */
  readonly remaining: number
  /** Until this rule's state is back to fresh, assuming no further requests. */
  readonly resetAfterMs: number
  /** The smallest wait after which the same request would pass this rule (0 when allowed). */
  readonly retryAfterMs: number
  /** How long to hold an admitted request (shaping leaky bucket only, else undefined). */
  readonly delayMs: number | undefined
  /** Why the request was denied (undefined when admitted). */
  readonly reason: DenyReason | undefined
}

/** The answer for one request. A denial is a decision, never an error. */
export interface Decision extends Omit<RuleDecision, 'name'> {
  /** Every rule's part, in rule order. */
  readonly rules: readonly RuleDecision[]
}

/** Per-call options. */
export interface LimitOptions {
  /** Units this request costs; 0 decides without charging (a peek). @default 1 */
  cost?: number
}

/** A rate limiter over one or more rules. */
export interface Limiter {
  /** Decides and, if admitted, charges every rule. */
  limit(key: string, options?: LimitOptions): Promise<Decision>
  /** The synchronous form, for stores that are in-process (the memory store). */
  limitSync(key: string, options?: LimitOptions): Decision
  /** The decision a cost-1 request would get now, without charging. */
  peek(key: string): Promise<Decision>
  /** Forgets `key` in every rule. */
  reset(key: string): Promise<void>
  /** The rules as validated. */
  readonly rules: readonly StoreRule[]
}

const NAME = /^[\x21-\x7e]{1,64}$/

/**
 * Creates a limiter. Options are validated once, here: an invalid one throws a `ConfigError`
 * listing every problem with its path and code.
 *
 * @example
 * const limiter = createLimiter({
 *   rules: [{ name: 'burst', algorithm: tokenBucket({ capacity: 20, refillRate: 10 }) },
 *           { name: 'sustained', algorithm: slidingWindow({ limit: 100, window: '60s' }) }],
 * })
 * const d = await limiter.limit('client-key')
 * if (!d.allowed) console.log(`retry in ${d.retryAfterMs} ms`)
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const rules = validate(options)
  const clock = options.clock ?? systemClock
  const store = options.store ?? memoryStore()
  const bound: BoundRules = store.bind(rules)
  const evaluateSync = bound.evaluateSync?.bind(bound)
  const names = rules.map((r) => r.name)
  const limits = rules.map((r) => limitOf(r))
  const shaping = rules.map((r) => r.policy.algorithm === 'leaky-bucket' && r.policy.mode === 'shape')
  const anyShaping = shaping.includes(true)

  function decision(verdicts: readonly RuleVerdict[]): Decision {
    if (verdicts.length === 1) {
      const v = verdicts[0] as RuleVerdict
      const delayMs = shaping[0] === true && v.allowed ? v.delayMs : undefined
      return {
        allowed: v.allowed,
        limit: limits[0] as number,
        remaining: v.remaining,
        resetAfterMs: v.resetAfterMs,
        retryAfterMs: v.retryAfterMs,
        delayMs,
        reason: v.reason,
        rules: [ruleDecision(0, v)],
      }
    }
    let allowed = true
    for (const v of verdicts) if (!v.allowed) allowed = false
    const parts = verdicts.map((v, i) => ruleDecision(i, v))
    const bind = parts[bindingRule(parts, allowed)] as RuleDecision
    let delay = 0
    for (const p of parts) if (p.delayMs !== undefined && p.delayMs > delay) delay = p.delayMs
    return {
      allowed,
      limit: bind.limit,
      remaining: bind.remaining,
      resetAfterMs: bind.resetAfterMs,
      retryAfterMs: allowed ? 0 : bind.retryAfterMs,
      delayMs: allowed && anyShaping ? delay : undefined,
      reason: allowed ? undefined : bind.reason,
      rules: parts,
    }
  }

  function ruleDecision(i: number, v: RuleVerdict): RuleDecision {
    return {
      name: names[i] as string,
      allowed: v.allowed,
      limit: limits[i] as number,
      remaining: v.remaining,
      resetAfterMs: v.resetAfterMs,
      retryAfterMs: v.retryAfterMs,
      delayMs: shaping[i] === true && v.allowed ? v.delayMs : undefined,
      reason: v.reason,
    }
  }

  async function limitAsync(key: string, opts?: LimitOptions): Promise<Decision> {
    const cost = checkCall(key, opts)
    return decision(await bound.evaluate(key, cost, clock.now()))
  }

  // A synchronous store answers with an already-settled promise: no async frame per call.
  const limit =
    evaluateSync === undefined
      ? limitAsync
      : (key: string, opts?: LimitOptions): Promise<Decision> => {
          try {
            const cost = checkCall(key, opts)
            return Promise.resolve(decision(evaluateSync(key, cost, clock.now())))
          } catch (error) {
            return Promise.reject(error)
          }
        }

  return {
    rules,
    limit,
    limitSync(key, opts) {
      if (evaluateSync === undefined) {
        throw new EdgelimitError(
          'ERR_EDGELIMIT_SYNC_UNSUPPORTED',
          `The ${store.name} store is not synchronous; use limit() instead of limitSync()`,
        )
      }
      const cost = checkCall(key, opts)
      const now = clock.now()
      return decision(evaluateSync(key, cost, now))
    },
    peek: (key) => limit(key, { cost: 0 }),
    async reset(key) {
      checkCall(key, undefined)
      await bound.reset(key)
    },
  }
}

/**
 * The index of the rule that binds a decision: when admitted, the one closest to exhaustion;
 * when denied, the one that keeps the request out longest (it passes once every rule admits it).
 */
export function bindingRule(parts: readonly RuleDecision[], allowed: boolean): number {
  let bind = 0
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i] as RuleDecision
    const b = parts[bind] as RuleDecision
    if (allowed ? p.remaining < b.remaining : !p.allowed && (b.allowed || p.retryAfterMs > b.retryAfterMs))
      bind = i
  }
  return bind
}

function checkCall(key: unknown, opts: LimitOptions | undefined): number {
  if (typeof key !== 'string') {
    throw new EdgelimitError('ERR_EDGELIMIT_KEY', `Expected \`key\` to be a string, got ${describe(key)}`)
  }
  const cost = opts?.cost ?? 1
  if (!Number.isSafeInteger(cost) || cost < 0) {
    throw new EdgelimitError(
      'ERR_EDGELIMIT_COST',
      `Expected \`cost\` to be a non-negative integer, got ${describe(cost)}`,
    )
  }
  return cost
}

function limitOf(rule: StoreRule): number {
  const p = rule.policy
  switch (p.algorithm) {
    case 'token-bucket':
      return p.capacity
    case 'leaky-bucket':
      return p.mode === 'shape' ? p.capacity + 1 : p.capacity
    case 'gcra':
      return p.burst
    default:
      return p.limit
  }
}

function validate(options: LimiterOptions): StoreRule[] {
  const issues = createIssues()
  const rules: StoreRule[] = []
  if (!issues.object('options', options)) throw new ConfigError(issues.list)
  const list = options.rules as unknown
  if (!Array.isArray(list) || list.length === 0) {
    issues.add('rules', 'ERR_EMPTY_RULES', `expected a non-empty array of rules, got ${describe(list)}`)
  } else {
    const seen = new Set<string>()
    list.forEach((rule: unknown, i) => {
      const path = `rules[${i}]`
      if (!issues.object(path, rule)) return
      const name = rule.name
      if (typeof name !== 'string' || !NAME.test(name)) {
        issues.add(
          `${path}.name`,
          'ERR_RULE_NAME',
          `expected 1–64 printable ASCII characters without spaces, got ${describe(name)}`,
        )
      } else if (seen.has(name)) {
        issues.add(`${path}.name`, 'ERR_DUPLICATE_RULE', `rule name "${name}" is used twice`)
      } else seen.add(name)
      const policy = toPolicy(rule.algorithm, `${path}.algorithm`, issues)
      if (policy !== undefined && typeof name === 'string') rules.push({ name, policy })
    })
  }
  const { clock, store } = options
  if (
    clock !== undefined &&
    (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function')
  ) {
    issues.add('clock', 'ERR_CLOCK', `expected an object with a now() method, got ${describe(clock)}`)
  }
  if (
    store !== undefined &&
    (typeof store !== 'object' || store === null || typeof store.bind !== 'function')
  ) {
    issues.add('store', 'ERR_STORE', `expected a store such as memoryStore(), got ${describe(store)}`)
  }
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  return rules
}
