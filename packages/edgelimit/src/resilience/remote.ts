import { monotonic } from '../clock.js'
import { type Decision, limitOf } from '../decision.js'
import { EdgelimitError } from '../errors.js'
import type { DecisionSource } from '../events.js'
import type { RuleConfig } from '../options.js'
import { memoryStore } from '../stores/memory.js'
import type { BoundRules, Decider, EvaluateOptions, RuleVerdict } from '../stores/types.js'
import { createApproximate } from './approximate.js'
import { createBreaker } from './breaker.js'
import { createDeadline } from './deadline.js'
import { createDenyCache } from './deny-cache.js'

/** A group of rules decided the same way, and where their verdicts go in the decision. */
interface Group {
  readonly index: readonly number[]
  readonly bound: BoundRules
  /** In-process limiter for the group's `onStoreError: 'local'` rules. */
  readonly fallback: BoundRules | undefined
  readonly fallbackIndex: readonly number[]
}

/**
 * The decision path of a remote store (Redis, Durable Objects, or your own): every store call
 * has a deadline (`timeout`, 45 ms by default) and goes through a circuit breaker; when the store
 * fails, each rule answers by its `onStoreError` (`closed` by default: deny with reason
 * `store-unavailable`). Recent denials are answered in-process until their retry time; `local`
 * rules are decided in-process and `approximate` ones counted in-process and synced in batches.
 *
 * Remote stores bring it themselves (`Store.decider`), so that an app on the memory store does
 * not bundle it. A custom remote store sets it too:
 *
 * @example
 * const store: Store = { name: 'mine', bind: (rules) => myBinding(rules), decider: remoteDecider }
 */
export const remoteDecider: Decider = (context) => {
  const { rules, config, store, clock, build, shadowOf, emit, report } = context
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
  const strict =
    strictIndex.length > 0 ? group(strictIndex, allStrict ? context.bound : undefined) : undefined
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

  const recordOk = (verdicts: readonly RuleVerdict[]) => {
    // A success's time is never read: it closes a half-open breaker and only ever counts.
    breaker?.record(true, 0)
    return verdicts
  }
  const recordFailure = (error: unknown): never => {
    breaker?.record(false, clock.now())
    throw error
  }

  /** One store call under the deadline, its outcome recorded by the breaker (asked first). */
  function run(bound: BoundRules, key: string, cost: number, now: number, options?: EvaluateOptions) {
    const work = bound.evaluate(key, cost, now, options)
    const timed = deadline === undefined ? work : deadline(work)
    return breaker === undefined ? timed : timed.then(recordOk, recordFailure)
  }

  /** Approximate syncs go through the same breaker and deadline as decisions. */
  function guarded(bound: BoundRules): BoundRules {
    return {
      evaluate: (key, cost, now, options) =>
        breaker !== undefined && !breaker.allow(now)
          ? Promise.reject(new EdgelimitError('ERR_EDGELIMIT_STORE', 'The store breaker is open'))
          : run(bound, key, cost, now, options),
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
      } else {
        const open = rule.onStoreError === 'open'
        out.push({
          allowed: open,
          remaining: 0,
          resetAfterMs: 0,
          retryAfterMs: open ? 0 : retry,
          delayMs: 0,
          reason: open ? undefined : 'store-unavailable',
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
    try {
      const verdicts = await run(g.bound, key, cost, now, mask === 0 ? undefined : { shadow: mask })
      emit?.({ type: 'store-latency', ms: monotonic() - started })
      return { verdicts, ok: true }
    } catch (error) {
      emit?.({ type: 'store-error', kind: storeErrorKind(error), error, latencyMs: monotonic() - started })
      return { verdicts: fallback(g, key, cost, now, mask), ok: false }
    }
  }

  function decide(key: string, cost: number): Promise<Decision> {
    try {
      const now = clock.now()
      const shadow = shadowOf(key)
      if (cache !== undefined && cost > 0) {
        const until = cache.until(key, cost, now)
        const hit = until === undefined ? undefined : cached.get(key)
        if (hit !== undefined) return Promise.resolve(report(key, aged(hit.decision, now - hit.at), 'cache'))
      }
      return strict !== undefined && allStrict
        ? decideStrict(strict, key, cost, now, shadow)
        : decideMixed(key, cost, now, shadow)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * The common case, every rule strict: one store call; `run`, `call` and the decision's building
   * fused into one continuation (no async frames between the store's answer and the decision).
   */
  function decideStrict(g: Group, key: string, cost: number, now: number, shadow: number): Promise<Decision> {
    if (breaker !== undefined && !breaker.allow(now)) {
      emit?.({ type: 'store-error', kind: 'breaker-open', latencyMs: 0 })
      return Promise.resolve(report(key, build(fallback(g, key, cost, now, shadow), shadow), 'fallback'))
    }
    const started = emit === undefined ? 0 : monotonic()
    const answered = (verdicts: readonly RuleVerdict[]): Decision => {
      breaker?.record(true, now)
      emit?.({ type: 'store-latency', ms: monotonic() - started })
      const decision = build(verdicts, shadow)
      if (cache !== undefined && !decision.allowed && Number.isFinite(decision.retryAfterMs)) {
        remember(key, cost, now, decision)
      }
      return report(key, decision, 'store')
    }
    const failed = (error: unknown): Decision => {
      breaker?.record(false, clock.now())
      emit?.({ type: 'store-error', kind: storeErrorKind(error), error, latencyMs: monotonic() - started })
      return report(key, build(fallback(g, key, cost, now, shadow), shadow), 'fallback')
    }
    let work: Promise<readonly RuleVerdict[]>
    try {
      work = g.bound.evaluate(key, cost, now, shadow === 0 ? undefined : { shadow })
    } catch (error) {
      // A store that throws instead of rejecting fails like one that rejects.
      work = Promise.reject(error)
    }
    return (deadline === undefined ? work : deadline(work)).then(answered, failed)
  }

  async function decideMixed(key: string, cost: number, now: number, shadow: number): Promise<Decision> {
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

  return {
    decide,
    reset(key) {
      cache?.delete(key)
      cached.delete(key)
      return Promise.all([
        strict?.bound.reset(key),
        approxGroup?.bound.reset(key),
        local?.reset(key),
        strict?.fallback?.reset(key),
        approxGroup?.fallback?.reset(key),
      ])
    },
    flush: () => approx?.flush(clock.now()) ?? Promise.resolve(),
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
