import { monotonic } from '../clock.js'
import type { Decision } from '../decision.js'
import type { EdgelimitError } from '../errors.js'
import type { DecisionSource } from '../events.js'
import type { RuleConfig } from '../options.js'
import { remember } from '../remember.js'
import { type MemoryRules, memoryStore } from '../stores/memory.js'
import type { BoundRules, Decider, RuleVerdict } from '../stores/types.js'
import type { ApproximateConsistency, StoreAnswer } from './approximate.js'
import { createBreaker } from './breaker.js'
import { type DeadlineClock, deadlineClock, type Watch } from './deadline.js'
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
    work?: Promise<readonly RuleVerdict[]>,
  ): T | Promise<T>
}

/**
 * The verdict of a rule whose state is not known here: one not asked (a cheaper group denied
 * first), or one failing open (`onStoreError: 'open'`, it admits). Its part is built as a shadow
 * rule's (see `RuleVerdict.unknown`).
 */
const UNKNOWN: RuleVerdict = Object.freeze({
  allowed: true,
  remaining: 0,
  resetAfterMs: 0,
  retryAfterMs: 0,
  delayMs: 0,
  reason: undefined,
  unknown: true,
})

/**
 * An approximate sync's verdicts (nothing falls back). A failed sync settles with the store call
 * itself: one past its deadline (reported then) with the store's late answer, as it still counts
 * there; one that failed, with its error. A sync the breaker refused was not sent: `undefined`.
 */
const SYNC: Outcome<readonly RuleVerdict[] | undefined> = {
  ok: (_key, _cost, _now, _mask, verdicts) => verdicts,
  fail: (_g, _key, _cost, _now, _mask, work) => work,
}

/** A group of rules decided the same way, and where their verdicts go in the decision. */
interface Group {
  readonly index: readonly number[]
  readonly bound: BoundRules
  /** In-process limiter for the group's `onStoreError: 'local'` rules. */
  readonly fallback: MemoryRules | undefined
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
  // All strict: denials are answered from it. Mixed: the strict rules' part of a request that an
  // earlier group denied (they are not asked) is told from it.
  const cache = config.denyCacheKeys > 0 ? new Map<string, Denial>() : undefined
  // Without one (`timeout: false`), a clock whose calls never expire.
  const deadline: DeadlineClock =
    config.timeoutMs === undefined
      ? { watch: () => ({}) as Watch, end: () => true }
      : deadlineClock(config.timeoutMs, true)
  const approx =
    approxGroup === undefined
      ? undefined
      : // The counter comes with the rules' `approximate` (an import), not with this module.
        ((rules[approxIndex[0] as number] as RuleConfig).approximate as ApproximateConsistency).create({
          // Syncs: forced charges through the breaker and the deadline, their failures reported
          // like decisions' (see SYNC for what a failed sync settles with); the key's shadow rules
          // are charged only when they admit the batch.
          sync: (key, cost, now, shadow) => attempt(approxGroup, key, cost, now, shadow, SYNC, true),
          rules: approxIndex.map((i) => rules[i] as RuleConfig),
          intervalMs: Math.min(...approxIndex.map((i) => (rules[i] as RuleConfig).syncIntervalMs)),
          clock,
          timeoutMs: config.timeoutMs,
        })

  const sub = (mask: number, index: readonly number[]) =>
    index.reduce((m, i, j) => ((mask & (1 << i)) !== 0 ? m | (1 << j) : m), 0)
  const blocks = (verdicts: readonly RuleVerdict[], mask: number) =>
    verdicts.some((v, j) => !v.allowed && (mask & (1 << j)) === 0)

  function fallback(g: Group, key: string, cost: number, now: number, mask: number): RuleVerdict[] {
    const closed = g.index.some(
      (i, j) => (rules[i] as RuleConfig).onStoreError === 'closed' && (mask & (1 << j)) === 0,
    )
    // Open, or half-open with its probe out: until the next probe may go (reopensAt is 0 closed).
    const retry = breaker && breaker.reopensAt > now ? breaker.reopensAt - now : 1000
    const local = g.fallback?.evaluateSync(key, closed ? 0 : cost, now, {
      shadow: sub(mask, g.fallbackIndex),
    })
    // `local` holds the group's local rules' verdicts, in their order in the group.
    let next = 0
    return g.index.map((i) => {
      const rule = rules[i] as RuleConfig
      emit?.({ type: 'fallback', mode: rule.onStoreError, rule: rule.name, key })
      return rule.onStoreError === 'local'
        ? { ...(local?.[next++] as RuleVerdict) }
        : rule.onStoreError === 'open'
          ? UNKNOWN
          : {
              allowed: false,
              remaining: 0,
              resetAfterMs: 0,
              retryAfterMs: retry,
              delayMs: 0,
              reason: 'store-unavailable',
            }
    })
  }

  /** Reports a store call started at `started` (`monotonic()`) that failed with `error`. */
  function failed(error: unknown, started: number): void {
    emit?.({
      type: 'store-error',
      kind: (error as EdgelimitError | undefined)?.code === 'ERR_EDGELIMIT_TIMEOUT' ? 'timeout' : 'error',
      error,
      latencyMs: monotonic() - started,
    })
  }

  function decide(key: string, cost: number): Promise<Decision> {
    try {
      const now = clock.now()
      const shadow = shadowOf(key)
      const hit = allStrict && cost > 0 && cache && cachedDenial(cache, key, cost, now)
      if (hit) return Promise.resolve(report(key, cost, hit, 'cache'))
      // All strict: there is a strict group (a limiter has rules).
      return allStrict
        ? attempt(strict as Group, key, cost, now, shadow, STRICT)
        : decideMixed(key, cost, now, shadow)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** A strict decision: from the store's verdicts, or from each rule's fallback. */
  const STRICT: Outcome<Decision> = {
    ok: (key, cost, now, shadow, verdicts) =>
      report(key, cost, note(key, cost, now, verdicts, build(verdicts, shadow)), 'store'),
    fail: (g, key, cost, now, shadow) =>
      report(key, cost, build(fallback(g, key, cost, now, shadow), shadow), 'fallback'),
  }

  /**
   * `decision`, cached while the store would answer the strict rules' `verdicts` the same, waits
   * aside: every rule denied and one short of the cost (it has `cost - 1` left, and gets no more
   * until its retry time), until the first rule's retry time (for good when every rule is a cost
   * it never admits). Anything else, an admission too, clears the key.
   */
  function note(
    key: string,
    cost: number,
    now: number,
    verdicts: readonly RuleVerdict[],
    decision: Decision,
  ) {
    if (cache !== undefined) {
      cache.delete(key)
      if (!decision.allowed && verdicts.every((v) => !v.allowed && v.remaining === cost - 1)) {
        const until = now + Math.min(...verdicts.map((v) => v.retryAfterMs))
        remember(cache, key, { at: now, until, cost, decision }, config.denyCacheKeys)
      }
    }
    return decision
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
   * each rule's fallback (a sync: the store call itself) — into the result (with `timeout: false`,
   * against a clock that never expires). `mask`: the group's shadow rules for the key; `force`: a
   * sync's forced charge. No async frames and no closures per call but the deadline's: this is
   * every strict decision's path.
   */
  function attempt<T>(
    g: Group,
    key: string,
    cost: number,
    now: number,
    mask: number,
    outcome: Outcome<T>,
    force?: true,
  ): Promise<T> {
    // The breaker's ticket for recording this call's outcome (none without a breaker).
    const ticket = breaker?.allow(now)
    if (ticket === 0) {
      emit?.({ type: 'store-error', kind: 'breaker-open', latencyMs: 0 })
      // Not sent: the outcome settles it with no store call (callers turn a throw into a rejection).
      return Promise.resolve(outcome.fail(g, key, cost, now, mask))
    }
    const started = emit === undefined ? 0 : monotonic()
    let work: Promise<readonly RuleVerdict[]>
    try {
      work = g.bound.evaluate(key, cost, now, mask === 0 && !force ? undefined : { shadow: mask, force })
    } catch (error) {
      // A store that throws instead of rejecting fails like one that rejects.
      work = Promise.reject(error)
    }
    return new Promise<T>((resolve, reject) => {
      const fail = (error: unknown) => {
        try {
          breaker?.record(ticket as number, false, clock.now())
          failed(error, started)
          resolve(outcome.fail(g, key, cost, now, mask, work))
        } catch (thrown) {
          reject(thrown)
        }
      }
      const watch = deadline.watch(fail)
      work.then(
        (verdicts) => {
          if (!deadline.end(watch)) return
          try {
            breaker?.record(ticket as number, true, now)
            emit?.({ type: 'store-latency', ms: monotonic() - started })
            resolve(outcome.ok(key, cost, now, mask, verdicts))
          } catch (thrown) {
            reject(thrown)
          }
        },
        (error: unknown) => {
          if (deadline.end(watch)) fail(error)
        },
      )
    })
  }

  async function decideMixed(key: string, cost: number, now: number, shadow: number): Promise<Decision> {
    const verdicts = rules.map(() => UNKNOWN)
    const place = (index: readonly number[], vs: readonly RuleVerdict[]) => {
      index.forEach((i, j) => {
        verdicts[i] = vs[j] as RuleVerdict
      })
    }
    const done = (source: DecisionSource) => report(key, cost, build(verdicts, shadow), source)
    // Denied before the strict rules are asked: they are told from their last answer here when it
    // still stands (a denial the store would repeat, aged: see `note`), else unknown.
    const denied = (source: DecisionSource) => {
      const hit = cache && cachedDenial(cache, key, cost, now)
      if (hit) place(strictIndex, hit.rules as never)
      return done(source)
    }
    let source: DecisionSource = 'store'
    // Cheapest first: in-process rules shield the store, then approximate, then strict.
    if (local !== undefined) {
      const mask = sub(shadow, localIndex)
      const vs = local.evaluateSync(key, cost, now, {
        shadow: mask,
      })
      place(localIndex, vs)
      if (blocks(vs, mask)) return denied('local')
    }
    // With `approx` comes its group.
    if (approx !== undefined) {
      const mask = sub(shadow, approxIndex)
      const answer = await approx.decide(key, cost, now, mask, (failed) =>
        failed
          ? GROUP.fail(approxGroup as Group, key, cost, now, mask)
          : attempt(approxGroup as Group, key, cost, now, mask, GROUP),
      )
      source = answer.source
      place(approxIndex, answer.verdicts)
      if (blocks(answer.verdicts, mask)) return denied(source)
    }
    if (strict !== undefined) {
      const mask = sub(shadow, strictIndex)
      // The approximate group's call just failed (an error, its deadline, the open breaker): the
      // strict rules answer by their onStoreError too, with no call of their own, so that a
      // decision waits for one deadline, not one per group.
      const answer = await (source === 'fallback'
        ? GROUP.fail(strict, key, cost, now, mask)
        : attempt(strict, key, cost, now, mask, GROUP))
      place(strictIndex, answer.verdicts)
      if (answer.source === 'fallback') source = 'fallback'
      // Noted as the strict rules' verdicts alone (what `denied` places).
      else note(key, cost, now, answer.verdicts, { rules: answer.verdicts } as never)
    }
    return done(source)
  }

  return {
    decide,
    reset(key) {
      // Cleared at once, so decisions from now on ask the store…
      cache?.delete(key)
      approx?.reset(key)
      // A store waits for its calls in flight no longer than their deadline (see BoundRules.reset).
      const started = monotonic()
      const done = Promise.all([
        strict?.bound.reset(key, config.timeoutMs),
        approxGroup?.bound.reset(key, config.timeoutMs),
        local?.reset(key),
        strict?.fallback?.reset(key),
        approxGroup?.fallback?.reset(key),
      ]).catch((error: unknown) => {
        // The store failed the reset, or missed the deadline: reported as a decision call's failure
        // is (the breaker does not count it), and the reset rejects.
        failed(error, started)
        throw error
      })
      // …and again once the store has forgotten the key: a denial in flight may have cached it.
      return done.finally(() => cache?.delete(key))
    },
    flush: () => approx?.flush(clock.now()) ?? Promise.resolve(),
  }
}
