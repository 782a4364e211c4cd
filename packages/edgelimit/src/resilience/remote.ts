import { monotonic } from '../clock.js'
import { type Decision, limitOf } from '../decision.js'
import { EdgelimitError } from '../errors.js'
import type { DecisionSource } from '../events.js'
import type { RuleConfig } from '../options.js'
import { remember } from '../remember.js'
import { memoryStore } from '../stores/memory.js'
import type { BoundRules, Decider, EvaluateOptions, RuleVerdict } from '../stores/types.js'
import type { ApproximateConsistency, StoreAnswer } from './approximate.js'
import { createBreaker } from './breaker.js'
import { deadlineClock } from './deadline.js'
import { cachedDenial, type Denial } from './deny-cache.js'

/** What a store call ends in: `ok` maps the store's verdicts, `fail` the rules' fallbacks. */
interface Outcome<T> {
  ok(key: string, cost: number, now: number, mask: number, verdicts: readonly RuleVerdict[]): T
  /** `work`: the store call, maybe still running (past the deadline); none when the breaker refused it. */
  fail(
    g: Group,
    key: string,
    cost: number,
    now: number,
    mask: number,
    error: unknown,
    work?: Promise<readonly RuleVerdict[]>,
  ): T | Promise<T>
}

const FORCE: EvaluateOptions = Object.freeze({ force: true })
const BREAKER_OPEN = /* @__PURE__ */ new EdgelimitError('ERR_EDGELIMIT_STORE', 'The store breaker is open')

/**
 * An approximate sync's verdicts (nothing falls back). A failed sync settles with the store call
 * itself: one past its deadline (reported then) with the store's late answer, as it still counts
 * there; one that failed, with its error. A sync the breaker refused was not sent: `undefined`.
 */
const SYNC: Outcome<readonly RuleVerdict[] | undefined> = {
  ok: (_key, _cost, _now, _mask, verdicts) => verdicts,
  fail: (_g, _key, _cost, _now, _mask, _error, work) => work,
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
  const cache = allStrict && config.denyCacheKeys > 0 ? new Map<string, Denial>() : undefined
  const deadline = config.timeoutMs === undefined ? undefined : deadlineClock(config.timeoutMs, true)
  const approx =
    approxGroup === undefined
      ? undefined
      : // The counter comes with the rules' `approximate` (an import), not with this module.
        ((rules[approxIndex[0] as number] as RuleConfig).approximate as ApproximateConsistency).create({
          // Syncs: forced charges through the breaker and the deadline, their failures reported
          // like decisions' (see SYNC for what a failed sync settles with).
          sync: (key, cost, now) => attempt(approxGroup, key, cost, now, 0, SYNC, FORCE),
          rules: approxIndex.length,
          intervalMs: Math.min(...approxIndex.map((i) => (rules[i] as RuleConfig).syncIntervalMs)),
          timeoutMs: config.timeoutMs,
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
    const retry = breaker?.state === 'open' ? Math.max(1, breaker.reopensAt - now) : 1000
    const local = g.fallback?.evaluateSync?.(key, closed ? 0 : cost, now, {
      shadow: sub(mask, g.fallbackIndex),
    })
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

  function decide(key: string, cost: number): Promise<Decision> {
    try {
      const now = clock.now()
      const shadow = shadowOf(key)
      if (cache !== undefined && cost > 0) {
        const hit = cachedDenial(cache, key, cost, now)
        if (hit !== undefined)
          return Promise.resolve(report(key, cost, aged(hit.decision, now - hit.at), 'cache'))
      }
      return strict !== undefined && allStrict
        ? attempt(strict, key, cost, now, shadow, STRICT)
        : decideMixed(key, cost, now, shadow)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** A strict decision: from the store's verdicts, or from each rule's fallback. */
  const STRICT: Outcome<Decision> = {
    ok(key, cost, now, shadow, verdicts) {
      const decision = build(verdicts, shadow)
      if (cache !== undefined) {
        // Cached only while the store would answer the same, waits aside: every rule denied and
        // one short of the cost (it has `cost - 1` left, and gets no more until its retry time),
        // until the first rule's retry time (for good when every rule is a cost it never admits).
        // Anything else, an admission too, clears the key.
        cache.delete(key)
        if (!decision.allowed && verdicts.every((v) => !v.allowed && v.remaining === cost - 1)) {
          const until = now + Math.min(...verdicts.map((v) => v.retryAfterMs))
          remember(cache, key, { at: now, until, cost, decision }, config.denyCacheKeys)
        }
      }
      return report(key, cost, decision, 'store')
    },
    fail: (g, key, cost, now, shadow) =>
      report(key, cost, build(fallback(g, key, cost, now, shadow), shadow), 'fallback'),
  }

  /** A group's verdicts, for a decision with several groups. */
  const GROUP: Outcome<StoreAnswer> = {
    ok: (_key, _cost, _now, _mask, verdicts) => ({ verdicts, source: 'store' }),
    fail: (g, key, cost, now, mask) => ({ verdicts: fallback(g, key, cost, now, mask), source: 'fallback' }),
  }

  /**
   * One store call for group `g`: the breaker is asked first, the outcome recorded by it; the
   * store's answer and the deadline race to settle one promise (the deadline has no promise of
   * its own), and `outcome` turns the verdicts — or, when the store failed or missed the deadline,
   * each rule's fallback (a sync: the store call itself) — into the result. No async frames and no
   * closures per call but the deadline's: this is every strict decision's path.
   */
  function attempt<T>(
    g: Group,
    key: string,
    cost: number,
    now: number,
    mask: number,
    outcome: Outcome<T>,
    options: EvaluateOptions | undefined = mask === 0 ? undefined : { shadow: mask },
  ): Promise<T> {
    // The breaker's ticket for recording this call's outcome (none without a breaker).
    const ticket = breaker?.allow(now)
    if (ticket === 0) {
      emit?.({ type: 'store-error', kind: 'breaker-open', latencyMs: 0 })
      // Not sent: the outcome settles it with no store call (callers turn a throw into a rejection).
      return Promise.resolve(outcome.fail(g, key, cost, now, mask, BREAKER_OPEN))
    }
    const started = emit === undefined ? 0 : monotonic()
    let work: Promise<readonly RuleVerdict[]>
    try {
      work = g.bound.evaluate(key, cost, now, options)
    } catch (error) {
      // A store that throws instead of rejecting fails like one that rejects.
      work = Promise.reject(error)
    }
    if (deadline === undefined) {
      return work.then(
        (verdicts) => answered(key, cost, now, mask, started, ticket, verdicts, outcome),
        (error: unknown) => failed(g, key, cost, now, mask, started, ticket, error, outcome, work),
      )
    }
    const timer = deadline
    return new Promise<T>((resolve, reject) => {
      const fail = (error: unknown) => {
        try {
          resolve(failed(g, key, cost, now, mask, started, ticket, error, outcome, work))
        } catch (thrown) {
          reject(thrown)
        }
      }
      const watch = timer.watch(fail)
      work.then(
        (verdicts) => {
          if (!timer.end(watch)) return
          try {
            resolve(answered(key, cost, now, mask, started, ticket, verdicts, outcome))
          } catch (thrown) {
            reject(thrown)
          }
        },
        (error: unknown) => {
          if (timer.end(watch)) fail(error)
        },
      )
    })
  }

  function answered<T>(
    key: string,
    cost: number,
    now: number,
    mask: number,
    started: number,
    ticket: number | undefined,
    verdicts: readonly RuleVerdict[],
    outcome: Outcome<T>,
  ): T {
    breaker?.record(ticket as number, true, now)
    emit?.({ type: 'store-latency', ms: monotonic() - started })
    return outcome.ok(key, cost, now, mask, verdicts)
  }

  function failed<T>(
    g: Group,
    key: string,
    cost: number,
    now: number,
    mask: number,
    started: number,
    ticket: number | undefined,
    error: unknown,
    outcome: Outcome<T>,
    work: Promise<readonly RuleVerdict[]>,
  ): T | Promise<T> {
    breaker?.record(ticket as number, false, clock.now())
    emit?.({ type: 'store-error', kind: storeErrorKind(error), error, latencyMs: monotonic() - started })
    return outcome.fail(g, key, cost, now, mask, error, work)
  }

  async function decideMixed(key: string, cost: number, now: number, shadow: number): Promise<Decision> {
    // A rule whose group is not asked (an earlier group denied) answers untouched.
    const verdicts = rules.map(
      (rule): RuleVerdict => ({
        allowed: true,
        remaining: limitOf(rule),
        resetAfterMs: 0,
        retryAfterMs: 0,
        delayMs: 0,
        reason: undefined,
      }),
    )
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
      if (blocks(vs, mask)) return report(key, cost, build(verdicts, shadow), 'local')
    }
    if (approx !== undefined && approxGroup !== undefined) {
      const mask = sub(shadow, approxIndex)
      const answer = await approx.decide(key, cost, now, mask, (failed) =>
        failed
          ? GROUP.fail(approxGroup, key, cost, now, mask, 0)
          : attempt(approxGroup, key, cost, now, mask, GROUP),
      )
      source = answer.source
      place(approxIndex, answer.verdicts)
      if (blocks(answer.verdicts, mask)) return report(key, cost, build(verdicts, shadow), source)
    }
    if (strict !== undefined) {
      const answer = await attempt(strict, key, cost, now, sub(shadow, strictIndex), GROUP)
      place(strictIndex, answer.verdicts)
      if (answer.source === 'fallback') source = 'fallback'
    }
    return report(key, cost, build(verdicts, shadow), source)
  }

  return {
    decide,
    reset(key) {
      // Cleared at once, so decisions from now on ask the store…
      cache?.delete(key)
      approx?.reset(key)
      // A store waits for its calls in flight no longer than their deadline (see BoundRules.reset).
      const done = Promise.all([
        strict?.bound.reset(key, config.timeoutMs),
        approxGroup?.bound.reset(key, config.timeoutMs),
        local?.reset(key),
        strict?.fallback?.reset(key),
        approxGroup?.fallback?.reset(key),
      ])
      // …and again once the store has forgotten the key: a denial in flight may have cached it.
      return done.finally(() => cache?.delete(key))
    },
    flush: () => approx?.flush(clock.now()) ?? Promise.resolve(),
  }
}

/** How a failed store call is reported: a missed deadline, or any other error. */
function storeErrorKind(error: unknown): 'timeout' | 'error' {
  return (error as EdgelimitError | undefined)?.code === 'ERR_EDGELIMIT_TIMEOUT' ? 'timeout' : 'error'
}

/**
 * A cached denial as it stands `ms` later, before the first rule's retry time: every rule still
 * denies, its waits shortened by the time passed (a wait of `Infinity` stays).
 */
function aged(decision: Decision, ms: number): Decision {
  const age = <T extends { retryAfterMs: number; resetAfterMs: number }>(r: T): T => ({
    ...r,
    retryAfterMs: r.retryAfterMs - ms,
    resetAfterMs: Math.max(0, r.resetAfterMs - ms),
  })
  return { ...age(decision), rules: decision.rules.map(age) }
}
