import { monotonic, systemClock } from './clock.js'
import { type Decision, decisionBuilder, limitOf } from './decision.js'
import { describe, EdgelimitError } from './errors.js'
import { type DecisionSource, type LimiterEvent, meterSink } from './events.js'
import { type LimiterOptions, type RuleConfig, validateOptions } from './options.js'
import { createApproximate } from './resilience/approximate.js'
import { createBreaker } from './resilience/breaker.js'
import { createDeadline } from './resilience/deadline.js'
import { createDenyCache } from './resilience/deny-cache.js'
import { enforcedFor } from './resilience/rollout.js'
import { memoryStore } from './stores/memory.js'
import type { BoundRules, RuleVerdict } from './stores/types.js'

export type { Decision, DecisionReason, RuleDecision } from './decision.js'
export { bindingRule } from './decision.js'
export type { Consistency, LimiterOptions, Rule, RuleConfig, StoreErrorMode } from './options.js'

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
  /** The current state (a cost-0 decision): `remaining`, `resetAfterMs` per rule; charges nothing. */
  peek(key: string): Promise<Decision>
  /** Forgets `key` in every rule. */
  reset(key: string): Promise<void>
  /** Sends counts that approximate rules still hold in-process (call before shutdown). */
  flush(): Promise<void>
  /** The rules as validated. */
  readonly rules: readonly RuleConfig[]
}

/** A group of rules decided the same way, and where their verdicts go in the decision. */
interface Group {
  readonly index: readonly number[]
  readonly bound: BoundRules
  /** In-process limiter for the group's `onStoreError: 'local'` rules. */
  readonly fallback: BoundRules | undefined
  readonly fallbackIndex: readonly number[]
}

/**
 * Creates a limiter. Options are validated once, here: an invalid one throws a `ConfigError`
 * listing every problem with its path and code.
 *
 * On a remote store every call has a deadline (`timeout`, 45 ms by default) and a circuit breaker;
 * when the store fails, each rule answers by its `onStoreError` (`closed` by default: deny with
 * reason `store-unavailable`). Recent denials are answered in-process until their retry time.
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
  const store = options.store ?? memoryStore()
  const build = decisionBuilder(rules)
  const sinks = [options.onEvent, options.meter === undefined ? undefined : meterSink(options.meter)].filter(
    (f): f is (e: LimiterEvent) => void => f !== undefined,
  )
  const emit =
    sinks.length === 0
      ? undefined
      : (event: LimiterEvent) => {
          // An observer's failure never changes a decision.
          for (const sink of sinks) {
            try {
              sink(event)
            } catch {}
          }
        }
  const rollout = rules.some((r) => r.shadow || r.enforce < 100)
  const shadowOf = (key: string) => {
    let mask = 0
    rules.forEach((r, i) => {
      if (r.shadow || !enforcedFor(r.name, key, r.enforce)) mask |= 1 << i
    })
    return mask
  }

  const main = store.bind(rules)
  const inProcess = main.evaluateSync?.bind(main)

  function report(key: string, decision: Decision, source: DecisionSource): Decision {
    if (emit === undefined) return decision
    emit({ type: 'decision', key, decision, source })
    for (const r of decision.rules)
      if (r.shadow && !r.allowed) emit({ type: 'shadow-deny', key, rule: r.name, decision })
    return decision
  }

  function inProcessDecision(key: string, cost: number): Decision {
    const shadow = rollout ? shadowOf(key) : 0
    const verdicts = (inProcess as NonNullable<typeof inProcess>)(
      key,
      cost,
      clock.now(),
      shadow === 0 ? undefined : { shadow },
    )
    const decision = build(verdicts, shadow)
    return emit === undefined ? decision : report(key, decision, 'store')
  }

  const remote = inProcess === undefined ? remoteLimiter() : undefined

  function remoteLimiter() {
    const byConsistency = (c: RuleConfig['consistency']) =>
      rules.flatMap((r, i) => (r.consistency === c ? [i] : []))
    const group = (index: number[], bound?: BoundRules): Group => {
      const subset = index.map((i) => rules[i] as RuleConfig)
      const fallbackIndex = index.flatMap((i, j) =>
        (rules[i] as RuleConfig).onStoreError === 'local' ? [j] : [],
      )
      return {
        index,
        bound: bound ?? store.bind(subset),
        fallback:
          fallbackIndex.length === 0
            ? undefined
            : memoryStore().bind(fallbackIndex.map((j) => subset[j] as RuleConfig)),
        fallbackIndex,
      }
    }
    const strictIndex = byConsistency('strict')
    const localIndex = byConsistency('local')
    const approxIndex = byConsistency('approximate')
    const allStrict = strictIndex.length === rules.length
    const strict = strictIndex.length > 0 ? group(strictIndex, allStrict ? main : undefined) : undefined
    const local =
      localIndex.length > 0 ? memoryStore().bind(localIndex.map((i) => rules[i] as RuleConfig)) : undefined
    const approxGroup = approxIndex.length > 0 ? group(approxIndex) : undefined
    const breaker =
      config.breaker === undefined
        ? undefined
        : createBreaker(config.breaker, (state) => emit?.({ type: 'breaker', state }))
    const cache = allStrict && config.denyCacheKeys > 0 ? createDenyCache(config.denyCacheKeys) : undefined
    const deadline = config.timeoutMs === undefined ? undefined : createDeadline(config.timeoutMs)
    const approx =
      approxGroup === undefined
        ? undefined
        : createApproximate(
            guarded(approxGroup.bound),
            approxIndex.length,
            Math.min(...approxIndex.map((i) => (rules[i] as RuleConfig).syncIntervalMs)),
            100_000,
            (error) => emit?.({ type: 'store-error', kind: storeErrorKind(error), error, latencyMs: 0 }),
          )

    /** Approximate syncs go through the same breaker and deadline as decisions. */
    function guarded(bound: BoundRules): BoundRules {
      return {
        evaluate(key, cost, now, options) {
          if (breaker !== undefined && !breaker.allow(now)) {
            return Promise.reject(new EdgelimitError('ERR_EDGELIMIT_STORE', 'The store breaker is open'))
          }
          const work = bound.evaluate(key, cost, now, options)
          return (deadline === undefined ? work : deadline(work)).then(
            (verdicts) => {
              breaker?.record(true, now)
              return verdicts
            },
            (error: unknown) => {
              breaker?.record(false, clock.now())
              throw error
            },
          )
        },
        reset: (key) => bound.reset(key),
      }
    }
    const cached = new Map<string, { decision: Decision; at: number }>()
    const untouched = (i: number): RuleVerdict => ({
      allowed: true,
      remaining: limitOf(rules[i] as RuleConfig),
      resetAfterMs: 0,
      retryAfterMs: 0,
      delayMs: 0,
      reason: undefined,
    })
    const sub = (mask: number, index: readonly number[]) =>
      index.reduce((m, i, j) => ((mask & (1 << i)) !== 0 ? m | (1 << j) : m), 0)
    const blocks = (verdicts: readonly RuleVerdict[], mask: number) =>
      verdicts.some((v, j) => !v.allowed && (mask & (1 << j)) === 0)

    function fallback(g: Group, key: string, cost: number, now: number, mask: number): RuleVerdict[] {
      const out: RuleVerdict[] = []
      const closed = g.index.some(
        (i, j) => (rules[i] as RuleConfig).onStoreError === 'closed' && (mask & (1 << j)) === 0,
      )
      const retry =
        breaker !== undefined && breaker.state === 'open' ? Math.max(1, breaker.reopensAt - now) : 1000
      const local =
        g.fallback === undefined
          ? undefined
          : g.fallback.evaluateSync?.(key, closed ? 0 : cost, now, { shadow: sub(mask, g.fallbackIndex) })
      g.index.forEach((i, j) => {
        const rule = rules[i] as RuleConfig
        emit?.({ type: 'fallback', mode: rule.onStoreError, rule: rule.name, key })
        if (rule.onStoreError === 'local') {
          out.push({ ...(local?.[g.fallbackIndex.indexOf(j)] as RuleVerdict) })
        } else if (rule.onStoreError === 'open') {
          out.push({
            allowed: true,
            remaining: 0,
            resetAfterMs: 0,
            retryAfterMs: 0,
            delayMs: 0,
            reason: undefined,
          })
        } else {
          out.push({
            allowed: false,
            remaining: 0,
            resetAfterMs: 0,
            retryAfterMs: retry,
            delayMs: 0,
            reason: 'store-unavailable',
          })
        }
      })
      return out
    }

    /** One store call under the breaker and the deadline; per-rule fallback when it fails. */
    async function call(g: Group, key: string, cost: number, now: number, mask: number) {
      if (breaker !== undefined && !breaker.allow(now)) {
        emit?.({ type: 'store-error', kind: 'breaker-open', latencyMs: 0 })
        return { verdicts: fallback(g, key, cost, now, mask), ok: false }
      }
      const started = emit === undefined ? 0 : monotonic()
      const work = g.bound.evaluate(key, cost, now, mask === 0 ? undefined : { shadow: mask })
      try {
        const verdicts = await (deadline === undefined ? work : deadline(work))
        breaker?.record(true, now)
        emit?.({ type: 'store-latency', ms: monotonic() - started })
        return { verdicts, ok: true }
      } catch (error) {
        breaker?.record(false, clock.now())
        emit?.({ type: 'store-error', kind: storeErrorKind(error), error, latencyMs: monotonic() - started })
        return { verdicts: fallback(g, key, cost, now, mask), ok: false }
      }
    }

    async function decide(key: string, cost: number): Promise<Decision> {
      const now = clock.now()
      const shadow = rollout ? shadowOf(key) : 0
      if (cache !== undefined && cost > 0) {
        const until = cache.until(key, cost, now)
        const hit = until === undefined ? undefined : cached.get(key)
        if (hit !== undefined) return report(key, aged(hit.decision, now - hit.at), 'cache')
      }
      if (strict !== undefined && allStrict) {
        // The common case: one store call for every rule.
        const result = await call(strict, key, cost, now, shadow)
        const decision = build(result.verdicts, shadow)
        if (cache !== undefined && result.ok && !decision.allowed && Number.isFinite(decision.retryAfterMs)) {
          remember(key, cost, now, decision)
        }
        return report(key, decision, result.ok ? 'store' : 'fallback')
      }
      const verdicts = rules.map((_, i) => untouched(i))
      const place = (index: readonly number[], vs: readonly RuleVerdict[]) => {
        index.forEach((i, j) => {
          verdicts[i] = vs[j] as RuleVerdict
        })
      }
      let source: DecisionSource = 'store'
      // Cheapest first: in-process rules shield the store, then approximate, then strict.
      if (local !== undefined) {
        const mask = sub(shadow, localIndex)
        const vs = (local.evaluateSync as NonNullable<BoundRules['evaluateSync']>)(key, cost, now, {
          shadow: mask,
        })
        place(localIndex, vs)
        if (blocks(vs, mask)) return report(key, build(verdicts, shadow), 'local')
      }
      if (approx !== undefined && approxGroup !== undefined) {
        const mask = sub(shadow, approxIndex)
        let vs: readonly RuleVerdict[] | undefined = approx.decide(key, cost, now, mask)
        if (vs === undefined) {
          const result = await call(approxGroup, key, cost, now, mask)
          vs = result.verdicts
          if (result.ok) approx.seed(key, result.verdicts, now)
          else source = 'fallback'
        } else source = 'approximate'
        place(approxIndex, vs)
        if (blocks(vs, mask)) return report(key, build(verdicts, shadow), source)
      }
      if (strict !== undefined) {
        const result = await call(strict, key, cost, now, sub(shadow, strictIndex))
        place(strictIndex, result.verdicts)
        if (!result.ok) source = 'fallback'
      }
      return report(key, build(verdicts, shadow), source)
    }

    function remember(key: string, cost: number, now: number, decision: Decision): void {
      if (cache === undefined) return
      cache.set(key, cost, now + decision.retryAfterMs)
      cached.set(key, { decision, at: now })
      if (cached.size > config.denyCacheKeys) cached.delete(cached.keys().next().value as string)
    }

    function resetKey(key: string): Promise<unknown> {
      cache?.delete(key)
      cached.delete(key)
      return Promise.all([
        strict?.bound.reset(key),
        approxGroup?.bound.reset(key),
        local?.reset(key),
        strict?.fallback?.reset(key),
        approxGroup?.fallback?.reset(key),
      ])
    }

    return Object.assign(decide, { resetKey, flush: () => approx?.flush(clock.now()) ?? Promise.resolve() })
  }

  const limit =
    remote === undefined
      ? (key: string, opts?: LimitOptions): Promise<Decision> => {
          // A synchronous store answers with an already-settled promise: no async frame per call.
          try {
            return Promise.resolve(inProcessDecision(key, checkCall(key, opts)))
          } catch (error) {
            return Promise.reject(error)
          }
        }
      : async (key: string, opts?: LimitOptions): Promise<Decision> => remote(key, checkCall(key, opts))

  return {
    rules,
    limit,
    limitSync(key, opts) {
      if (inProcess === undefined) {
        throw new EdgelimitError(
          'ERR_EDGELIMIT_SYNC_UNSUPPORTED',
          `The ${store.name} store is not synchronous; use limit() instead of limitSync()`,
        )
      }
      return inProcessDecision(key, checkCall(key, opts))
    },
    peek: (key) => limit(key, { cost: 0 }),
    async reset(key) {
      checkCall(key, undefined)
      if (remote === undefined) await main.reset(key)
      else await remote.resetKey(key)
    },
    flush: () => remote?.flush() ?? Promise.resolve(),
  }
}

/** How a failed store call is reported: a missed deadline, or any other error. */
function storeErrorKind(error: unknown): 'timeout' | 'error' {
  return error instanceof EdgelimitError && error.code === 'ERR_EDGELIMIT_TIMEOUT' ? 'timeout' : 'error'
}

/** A cached denial as it stands `ms` later: every wait shortened by the time passed. */
function aged(decision: Decision, ms: number): Decision {
  const less = (x: number) => (Number.isFinite(x) ? Math.max(0, x - ms) : x)
  return {
    ...decision,
    retryAfterMs: Math.max(1, less(decision.retryAfterMs)),
    resetAfterMs: less(decision.resetAfterMs),
    rules: decision.rules.map((r) => ({
      ...r,
      retryAfterMs: r.allowed ? 0 : Math.max(1, less(r.retryAfterMs)),
      resetAfterMs: less(r.resetAfterMs),
    })),
  }
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
