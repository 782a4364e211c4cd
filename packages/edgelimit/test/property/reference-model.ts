/**
 * An independent reference model of REFERENCE.md §1–§2, for the property tests next to it.
 *
 * Written from the definitions only (nothing is imported or copied from `src/core`) and kept
 * obviously correct rather than fast:
 * - time and rates are exact rationals over BigInt (`Rat`);
 * - the window algorithms keep an explicit list of admitted `(ts, cost)` entries and recount it
 *   from the definition at every instant asked about;
 * - every derived figure is found by brute force over the admission test itself:
 *   `remaining` admits cost-1 requests at `now` one by one until one is denied, `retryAfterMs` is
 *   the smallest whole `d ≥ 0` at which the same request would pass, `resetAfterMs` the smallest
 *   whole `d ≥ 0` at which the state is fresh.
 *
 * The two searches are binary searches over `[0, horizon]`. That is exact because, with no
 * further requests, admission and freshness only ever switch from false to true as time passes:
 * a fixed window's count is constant and then drops to 0; a log entry only leaves; the sliding
 * counter's estimate is non-increasing (within a window the weighted part shrinks, and at a
 * boundary it becomes `floor(cur · W / W) = cur`, no more than before); buckets refill or drain
 * monotonically; a TAT's wait `max(0, TAT − t)` only shrinks. The horizon is a bound on the time
 * any reachable state takes to be fresh, and is asserted, not assumed.
 */

/** A policy as the model reads it (the same plain data as a validated policy). */
export type ModelPolicy =
  | {
      readonly algorithm: 'fixed-window' | 'sliding-log' | 'sliding-window'
      readonly limit: number
      readonly windowMs: number
    }
  | {
      readonly algorithm: 'token-bucket'
      readonly capacity: number
      readonly refillRate: number
      readonly refillIntervalMs: number
    }
  | {
      readonly algorithm: 'leaky-bucket'
      readonly mode: 'police' | 'shape'
      readonly capacity: number
      readonly leakRate: number
      readonly leakIntervalMs: number
    }
  | { readonly algorithm: 'gcra'; readonly limit: number; readonly periodMs: number; readonly burst: number }

/** What the model expects of one decision. */
export interface ModelVerdict {
  readonly allowed: boolean
  readonly reason: 'limit-exceeded' | 'cost-exceeds-limit' | undefined
  /** The highest cost that can ever pass: what the decision reports as `limit`. */
  readonly limit: number
  readonly remaining: number
  readonly retryAfterMs: number
  readonly resetAfterMs: number
  /** Shaping only, on admission: how long to hold the request; 0 otherwise. */
  readonly delayMs: number
}

/**
 * A reference limiter for one key. Times passed to `decide` must not decrease, except for the
 * window counters, which define a clock stepping back (ADR 0002).
 */
export interface Model {
  decide(nowMs: number, cost: number): ModelVerdict
}

// ---------------------------------------------------------------------------------------------
// Exact rationals.

/** n / d with d > 0, reduced. */
export interface Rat {
  readonly n: bigint
  readonly d: bigint
}

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a
  let y = b < 0n ? -b : b
  while (y !== 0n) [x, y] = [y, x % y]
  return x
}

/** floor(n / d) for d > 0 (BigInt division truncates toward zero). */
function floorDiv(n: bigint, d: bigint): bigint {
  const q = n / d
  return n % d !== 0n && n < 0n ? q - 1n : q
}

export function rat(n: bigint, d = 1n): Rat {
  if (d <= 0n) throw new Error(`bad denominator ${d}`)
  const g = gcd(n, d)
  return g === 0n ? { n: 0n, d: 1n } : { n: n / g, d: d / g }
}

const add = (a: Rat, b: Rat): Rat => rat(a.n * b.d + b.n * a.d, a.d * b.d)
const sub = (a: Rat, b: Rat): Rat => rat(a.n * b.d - b.n * a.d, a.d * b.d)
const mul = (a: Rat, b: Rat): Rat => rat(a.n * b.n, a.d * b.d)
const cmp = (a: Rat, b: Rat): number => {
  const x = a.n * b.d - b.n * a.d
  return x < 0n ? -1 : x > 0n ? 1 : 0
}
const le = (a: Rat, b: Rat): boolean => cmp(a, b) <= 0
const eq = (a: Rat, b: Rat): boolean => cmp(a, b) === 0
const max = (a: Rat, b: Rat): Rat => (cmp(a, b) >= 0 ? a : b)
const min = (a: Rat, b: Rat): Rat => (cmp(a, b) <= 0 ? a : b)
const ceil = (a: Rat): bigint => -floorDiv(-a.n, a.d)
const ZERO = rat(0n)

// ---------------------------------------------------------------------------------------------
// The algorithms, each as an admission test, a charge and a freshness test on a plain state.

interface Machine<S> {
  /** The highest cost that can ever pass; above it a request is denied for good. */
  readonly maxCost: bigint
  /** No reachable state takes longer than this (ms, no further requests) to be fresh. */
  readonly horizon: bigint
  readonly fresh: S
  /** Whether a request of cost `c` arriving at `t` is admitted (REFERENCE §2). */
  admits(s: S, t: bigint, c: bigint): boolean
  /** The state after admitting cost `c ≥ 1` at `t`. */
  charge(s: S, t: bigint, c: bigint): S
  /** Whether the state at `t` is that of a key never seen (REFERENCE §2, `resetAfterMs`). */
  isFresh(s: S, t: bigint): boolean
  /** Shaping only: the hold time, in whole ms, of a request admitted at `t`. */
  delay?(s: S, t: bigint): bigint
  /** Whether the machine defines times that step back (else they must not decrease). */
  readonly stepsBack?: true
}

interface Entry {
  readonly ts: bigint
  readonly cost: bigint
}
type Entries = readonly Entry[]

const total = (entries: Entries, counts: (e: Entry) => boolean): bigint =>
  entries.reduce((sum, e) => (counts(e) ? sum + e.cost : sum), 0n)

/** Appends an entry, forgetting those no later instant can count (older than two windows). */
const append = (s: Entries, t: bigint, c: bigint, w: bigint): Entries => [
  ...s.filter((e) => t - e.ts < 2n * w),
  { ts: t, cost: c },
]

/**
 * The instant a window counter decides at: `t`, or the start of the newest window charged when the
 * clock has stepped back before it (ADR 0002: a lagging clock admits no more). Entries are appended
 * at this instant, so the last one is in the newest window.
 */
function held(s: Entries, t: bigint, w: bigint): bigint {
  const last = s.at(-1)
  const start = last === undefined ? 0n : (last.ts / w) * w
  return t > start ? t : start
}

function fixedWindow(limit: bigint, w: bigint): Machine<Entries> {
  // Windows [kW, (k+1)W): the count at t is the cost admitted in t's window.
  const count = (s: Entries, t: bigint) => {
    const k = held(s, t, w) / w
    return total(s, (e) => e.ts / w === k)
  }
  return {
    maxCost: limit,
    horizon: w,
    fresh: [],
    admits: (s, t, c) => count(s, t) + c <= limit,
    charge: (s, t, c) => append(s, held(s, t, w), c, w),
    isFresh: (s, t) => count(s, t) === 0n,
    stepsBack: true,
  }
}

function slidingLog(limit: bigint, w: bigint): Machine<Entries> {
  // An entry at ts counts while t − ts < W.
  const counted = (s: Entries, t: bigint) => total(s, (e) => t - e.ts < w)
  return {
    maxCost: limit,
    horizon: w,
    fresh: [],
    admits: (s, t, c) => counted(s, t) + c <= limit,
    charge: (s, t, c) => append(s, t, c, w),
    isFresh: (s, t) => counted(s, t) === 0n,
  }
}

function slidingCounter(limit: bigint, w: bigint): Machine<Entries> {
  // estimate = cur + floor(prev · (W − e) / W), e = t − kW (all non-negative: `/` is floor).
  const estimate = (s: Entries, at: bigint) => {
    const t = held(s, at, w)
    const k = t / w
    const e = t - k * w
    const cur = total(s, (x) => x.ts / w === k)
    const prev = total(s, (x) => x.ts / w === k - 1n)
    return cur + (prev * (w - e)) / w
  }
  return {
    maxCost: limit,
    horizon: 2n * w,
    fresh: [],
    admits: (s, t, c) => estimate(s, t) + c <= limit,
    charge: (s, t, c) => append(s, held(s, t, w), c, w),
    isFresh: (s, t) => estimate(s, t) === 0n,
    stepsBack: true,
  }
}

interface Meter {
  readonly level: Rat
  readonly last: bigint
}

function tokenBucket(capacity: bigint, rate: bigint, interval: bigint): Machine<Meter> {
  const full = rat(capacity)
  // tokens(t) = min(C, tokens + (t − last) · r / P), starting full.
  const tokens = (s: Meter, t: bigint) => min(full, add(s.level, rat((t - s.last) * rate, interval)))
  return {
    maxCost: capacity,
    horizon: ceil(rat(capacity * interval, rate)),
    fresh: { level: full, last: 0n },
    admits: (s, t, c) => le(rat(c), tokens(s, t)),
    charge: (s, t, c) => ({ level: sub(tokens(s, t), rat(c)), last: t }),
    isFresh: (s, t) => eq(tokens(s, t), full),
  }
}

function leakyPolice(capacity: bigint, rate: bigint, interval: bigint): Machine<Meter> {
  // level(t) = max(0, level − (t − last) · r / P), starting empty.
  const level = (s: Meter, t: bigint) => max(ZERO, sub(s.level, rat((t - s.last) * rate, interval)))
  return {
    maxCost: capacity,
    horizon: ceil(rat(capacity * interval, rate)),
    fresh: { level: ZERO, last: 0n },
    admits: (s, t, c) => le(add(level(s, t), rat(c)), rat(capacity)),
    charge: (s, t, c) => ({ level: add(level(s, t), rat(c)), last: t }),
    isFresh: (s, t) => eq(level(s, t), ZERO),
  }
}

/** A theoretical arrival time; `undefined` is −∞, a key never seen. */
type Tat = Rat | undefined

const wait = (tat: Tat, t: bigint): Rat => (tat === undefined ? ZERO : max(ZERO, sub(tat, rat(t))))
const tatFresh = (tat: Tat, t: bigint): boolean => tat === undefined || le(tat, rat(t))
/** max(TAT, t) + c · T. */
const nextTat = (tat: Tat, t: bigint, c: bigint, T: Rat): Rat =>
  add(tat === undefined ? rat(t) : max(tat, rat(t)), mul(rat(c), T))

function gcra(limit: bigint, period: bigint, burst: bigint): Machine<Tat> {
  const T = rat(period, limit)
  const tau = mul(rat(burst), T)
  return {
    maxCost: burst,
    horizon: ceil(tau),
    fresh: undefined,
    // Allowed iff newTAT − now ≤ τ.
    admits: (s, t, c) => le(sub(nextTat(s, t, c, T), rat(t)), tau),
    charge: (s, t, c) => nextTat(s, t, c, T),
    isFresh: tatFresh,
  }
}

function leakyShape(capacity: bigint, rate: bigint, interval: bigint): Machine<Tat> {
  const T = rat(interval, rate)
  const queue = mul(rat(capacity), T)
  return {
    maxCost: capacity + 1n,
    horizon: ceil(mul(rat(capacity + 1n), T)),
    fresh: undefined,
    // The last unit of the request starts within Q·T: wait + (c − 1)·T ≤ Q·T.
    admits: (s, t, c) => le(add(wait(s, t), mul(rat(c - 1n), T)), queue),
    charge: (s, t, c) => nextTat(s, t, c, T),
    isFresh: tatFresh,
    delay: (s, t) => ceil(wait(s, t)),
  }
}

// ---------------------------------------------------------------------------------------------
// The decision contract (REFERENCE §1), the same for every algorithm.

/** The smallest d in [0, horizon] with `holds(d)`, for `holds` monotone (false…false true…true). */
function firstWhen(holds: (d: bigint) => boolean, horizon: bigint, what: string): bigint {
  if (holds(0n)) return 0n
  if (!holds(horizon)) throw new Error(`model: ${what} still false after the horizon ${horizon} ms`)
  let lo = 0n // false
  let hi = horizon // true
  while (hi - lo > 1n) {
    const mid = (lo + hi) / 2n
    if (holds(mid)) hi = mid
    else lo = mid
  }
  return hi
}

function drive<S>(m: Machine<S>): Model {
  let state = m.fresh
  let last = Number.NEGATIVE_INFINITY
  return {
    decide(nowMs, cost) {
      if (!Number.isSafeInteger(nowMs) || (nowMs < last && m.stepsBack !== true)) {
        throw new Error(`model: time ${nowMs} after ${last}`)
      }
      last = Math.max(last, nowMs)
      const now = BigInt(nowMs)
      // After a step back, the state can take the lag longer to pass.
      const horizon = m.horizon + BigInt(last - nowMs)
      const c = BigInt(cost)
      const never = c > m.maxCost
      // Self-check: "can never pass" is exactly "a fresh key would not admit it".
      if (never === m.admits(m.fresh, now, c)) throw new Error(`model: maxCost is wrong for cost ${c}`)
      const s = state
      const allowed = !never && m.admits(s, now, c)
      let retry: number
      if (allowed) retry = 0
      else if (never) retry = Number.POSITIVE_INFINITY
      else retry = Number(firstWhen((d) => m.admits(s, now + d, c), horizon, 'admission'))
      const delay = allowed && m.delay !== undefined ? m.delay(s, now) : 0n
      // A denied request changes nothing; cost 0 decides without charging.
      if (allowed && c > 0n) state = m.charge(s, now, c)
      let remaining = 0
      for (let probe = state; m.admits(probe, now, 1n); probe = m.charge(probe, now, 1n)) {
        if (++remaining > 10_000) throw new Error('model: remaining does not terminate')
      }
      const after = state
      const reset = firstWhen((d) => m.isFresh(after, now + d), horizon, 'freshness')
      return {
        allowed,
        reason: allowed ? undefined : never ? 'cost-exceeds-limit' : 'limit-exceeded',
        limit: Number(m.maxCost),
        remaining,
        retryAfterMs: retry,
        resetAfterMs: Number(reset),
        delayMs: Number(delay),
      }
    },
  }
}

/** A fresh reference limiter (one key) for `policy`. */
export function createModel(policy: ModelPolicy): Model {
  switch (policy.algorithm) {
    case 'fixed-window':
      return drive(fixedWindow(BigInt(policy.limit), BigInt(policy.windowMs)))
    case 'sliding-log':
      return drive(slidingLog(BigInt(policy.limit), BigInt(policy.windowMs)))
    case 'sliding-window':
      return drive(slidingCounter(BigInt(policy.limit), BigInt(policy.windowMs)))
    case 'token-bucket':
      return drive(
        tokenBucket(BigInt(policy.capacity), BigInt(policy.refillRate), BigInt(policy.refillIntervalMs)),
      )
    case 'leaky-bucket': {
      const q = BigInt(policy.capacity)
      const r = BigInt(policy.leakRate)
      const p = BigInt(policy.leakIntervalMs)
      return policy.mode === 'police' ? drive(leakyPolice(q, r, p)) : drive(leakyShape(q, r, p))
    }
    case 'gcra':
      return drive(gcra(BigInt(policy.limit), BigInt(policy.periodMs), BigInt(policy.burst)))
  }
}
