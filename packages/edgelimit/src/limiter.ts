import { systemClock } from './clock.js'
import { type Decision, decisionBuilder } from './decision.js'
import { describe, EdgelimitError, type ErrorCode } from './errors.js'
import type { DecisionSource, LimiterEvent } from './events.js'
import { type LimiterOptions, type RuleConfig, validateOptions } from './options.js'
import { enforcedFor } from './resilience/rollout.js'
import { memoryStore } from './stores/memory.js'

export type { Decision, DecisionReason, RuleDecision } from './decision.js'
export { bindingRule } from './decision.js'
export type {
  Consistency,
  ConsistencyMode,
  LimiterOptions,
  Rule,
  RuleConfig,
  StoreErrorMode,
} from './options.js'

/**
 * Options of one call. Not an object (`limit(key, 5)`): `ERR_EDGELIMIT_COST`. Its names are not
 * checked (each call would pay for it): a misspelt `costs` leaves the cost at 1.
 */
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
  /** The current state (a cost-0 decision): `remaining`, `resetAfterMs` per rule; charges nothing. */
  peek(key: string): Promise<Decision>
  /** Forgets `key` in every rule. */
  reset(key: string): Promise<void>
  /**
   * Sends counts that approximate rules still hold in-process and waits for their syncs in flight
   * (call before shutdown), no longer than the deadline (with `timeout: false`, 4 sync intervals:
   * a reply may be lost). Rejects (`ERR_EDGELIMIT_STORE`) when a
   * sync failed or went unanswered: counts the open breaker kept back stay pending for the next
   * sync; counts sent are never sent again (see docs/resilience.md).
   */
  flush(): Promise<void>
  /** The rules as validated. */
  readonly rules: readonly RuleConfig[]
}

/**
 * Creates a limiter. Options are validated once, here: an invalid one throws a `ConfigError`
 * listing every problem with its path and code.
 *
 * On an in-process store (the memory store) a decision is a synchronous call. On a remote store
 * the store's decision path (`remoteDecider`) runs it: every call has a deadline (`timeout`,
 * 45 ms by default) and a circuit breaker; when the store fails, each rule answers by its
 * `onStoreError` (`closed` by default: deny with reason `store-unavailable`). Recent denials are
 * answered in-process until their retry time.
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
  const config = validateOptions(options)
  const rules = config.rules
  const clock = options.clock ?? systemClock
  // Every decision reads the time here: a reading that is not integer ms ≥ 0 throws (or rejects).
  const now = (): number => whole(clock.now(), 'clock.now()', 'ERR_EDGELIMIT_CLOCK')
  const store = options.store ?? memoryStore()
  const build = decisionBuilder(rules)
  const sinks = [options.onEvent ?? []].flat()
  const emit =
    sinks.length === 0
      ? undefined
      : (event: LimiterEvent) => {
          // An observer's failure never changes a decision.
          for (const sink of sinks) {
            try {
              ;(sink(event) as unknown as Promise<void> | undefined)?.catch?.(String)
            } catch {}
          }
        }
  const rollout = rules.some((r) => r.shadow || r.enforce < 100)
  const shadowOf = (key: string): number => {
    if (!rollout) return 0
    let mask = 0
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i] as RuleConfig
      if (r.shadow || !enforcedFor(r.name, key, r.enforce)) mask |= 1 << i
    }
    return mask
  }
  function report(key: string, cost: number, decision: Decision, source: DecisionSource): Decision {
    if (emit === undefined) return decision
    emit({ type: 'decision', key, cost, decision, source })
    for (const r of decision.rules)
      if (r.shadow && !r.allowed) emit({ type: 'shadow-deny', key, rule: r.name, decision })
    return decision
  }

  // The limiter around either decision path: `limit` is the path's own promise (the store path's,
  // or an already-settled one around an in-process decision), without an async frame or a second
  // promise around it; `reset` checks the key, then resets it in `resets`.
  const limiter = (
    decide: (key: string, cost: number) => Decision | Promise<Decision>,
    limitSync: Limiter['limitSync'],
    resets: { reset(key: string): Promise<unknown> },
    flush: () => Promise<void>,
  ): Limiter => {
    const limit = (key: string, opts?: LimitOptions): Promise<Decision> => {
      try {
        return Promise.resolve(decide(key, checkCall(key, opts)))
      } catch (error) {
        return Promise.reject(error)
      }
    }
    return {
      rules,
      limit,
      limitSync,
      peek: (key) => limit(key, { cost: 0 }),
      async reset(key) {
        checkCall(key)
        await resets.reset(key)
      },
      flush,
    }
  }

  const bound = store.bind(rules)
  const evaluateSync = bound.evaluateSync
  if (evaluateSync === undefined) {
    const decider = store.decider
    if (decider === undefined) {
      throw new EdgelimitError(
        'ERR_EDGELIMIT_STORE',
        `The ${store.name} store needs evaluateSync or \`decider: remoteDecider\``,
      )
    }
    const path = decider({ rules, config, store, bound, clock: { now }, build, shadowOf, emit, report })
    return limiter(
      (key, cost) => path.decide(key, cost),
      () => {
        throw new EdgelimitError(
          'ERR_EDGELIMIT_SYNC_UNSUPPORTED',
          `The ${store.name} store is not synchronous; use limit() instead of limitSync()`,
        )
      },
      path,
      () => path.flush(),
    )
  }

  // In-process: one synchronous store call and the decision built from its verdicts.
  const one = build.one
  const decide =
    one !== undefined && !rollout && emit === undefined
      ? // The common case, specialised: one rule, no rollout, no observers.
        (key: string, cost: number): Decision => one(evaluateSync.call(bound, key, cost, now()))
      : (key: string, cost: number): Decision => {
          const shadow = shadowOf(key)
          const verdicts = evaluateSync.call(bound, key, cost, now(), shadow === 0 ? undefined : { shadow })
          return report(key, cost, build(verdicts, shadow), 'store')
        }
  const limitSync = (key: string, opts?: LimitOptions): Decision => decide(key, checkCall(key, opts))
  return limiter(decide, limitSync, bound, () => Promise.resolve())
}

function checkCall(key: unknown, opts?: LimitOptions): number {
  if (typeof key !== 'string') {
    throw new EdgelimitError('ERR_EDGELIMIT_KEY', `Expected \`key\` to be a string, got ${describe(key)}`)
  }
  // `limit(key)`, the common call, checks nothing more; `limit(key, 5)` is not a cost of 5.
  if (opts === undefined) return 1
  if (typeof opts !== 'object')
    throw new EdgelimitError(
      'ERR_EDGELIMIT_COST',
      `Expected \`options\` to be an object, got ${describe(opts)}`,
    )
  return whole(opts?.cost ?? 1, 'cost', 'ERR_EDGELIMIT_COST')
}

/**
 * `value` when it is a non-negative integer; otherwise throws `code`. The one check for a clock
 * reading, a cost and the HTTP layer's header clock, so all three fail alike.
 * @internal
 */
export function whole(value: number, name: string, code: ErrorCode): number {
  if (Number.isSafeInteger(value) && value >= 0) return value
  throw new EdgelimitError(code, `Expected \`${name}\` to be a non-negative integer, got ${describe(value)}`)
}
