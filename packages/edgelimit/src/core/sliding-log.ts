import { admit, deny, denyForever } from './deny.js'
import type { SlidingLogPolicy, Verdict } from './types.js'

/**
 * A sliding log: admitted requests' times in order with running cost sums, as a queue whose
 * front advances when entries leave the window. `sums[i]` is the total cost of entries
 * `0..i`; entries before `head` have left the window and are compacted away in bulk.
 */
export interface LogState {
  times: number[]
  sums: number[]
  head: number
}

/** A sliding-window log rule: exact, O(log n) per decision, amortised O(1) per admission. */
export interface LogRule {
  readonly kind: 'log'
  readonly policy: SlidingLogPolicy
  readonly limit: number
  /** The window (see `NumericRule.periodMs`). */
  readonly periodMs: number
  readonly width: 0
  /** Reads `log` (never writes it) and fills `out`. */
  decide(log: LogState | undefined, now: number, cost: number, out: Verdict): void
  /** Records a request's cost (admitted, or forced); returns the state to keep (the same object when given). */
  commit(log: LogState | undefined, now: number, cost: number): LogState
  expiresAt(log: LogState): number
}

/** Index of the first entry in `[lo, hi)` whose value in `xs` exceeds `x` (or reaches it). */
function search(xs: number[], lo: number, hi: number, x: number, inclusive: boolean): number {
  let a = lo
  let b = hi
  while (a < b) {
    const mid = (a + b) >>> 1
    const v = xs[mid] as number
    if (v > x || (inclusive && v === x)) b = mid
    else a = mid + 1
  }
  return a
}

function sumBefore(log: LogState, i: number): number {
  return i === 0 ? 0 : (log.sums[i - 1] as number)
}

/**
 * Sliding-window log (REFERENCE §2): an entry at `ts` counts while `now − ts < W`.
 * Reported `resetAfterMs` is when the newest entry leaves the window.
 */
export function compileSlidingLog(policy: SlidingLogPolicy): LogRule {
  const { limit, windowMs: w } = policy
  return {
    kind: 'log',
    policy,
    limit,
    periodMs: w,
    width: 0,
    decide(log: LogState | undefined, now: number, cost: number, out: Verdict) {
      const n = log === undefined ? 0 : log.times.length
      let counted = 0
      let newest = 0
      let first = 0
      if (log !== undefined && n > log.head) {
        first = search(log.times, log.head, n, now - w, false)
        counted = (log.sums[n - 1] as number) - sumBefore(log, first)
        newest = log.times[n - 1] as number
      }
      const reset = counted > 0 ? newest + w - now : 0
      const ttl = cost > 0 ? Math.max(w, reset) : reset
      if (cost > limit) return denyForever(out, Math.max(0, limit - counted), reset, ttl)
      if (counted + cost > limit) {
        // The request fits once the oldest entries holding more than `limit − cost` have left.
        const state = log as LogState
        const total = state.sums[n - 1] as number
        const i = search(state.sums, first, n, total - (limit - cost), true)
        return deny(out, (state.times[i] as number) + w - now, Math.max(0, limit - counted), reset, ttl)
      }
      admit(out, limit - counted - cost, ttl, ttl)
    },
    commit(log: LogState | undefined, now: number, cost: number): LogState {
      const state = log ?? { times: [], sums: [], head: 0 }
      const n = state.times.length
      state.head = search(state.times, state.head, n, now - w, false)
      if (state.head > 16 && state.head * 2 > n) compact(state)
      if (cost === 0) return state
      const { times, sums } = state
      const len = times.length
      const last = len > 0 ? (times[len - 1] as number) : Number.NEGATIVE_INFINITY
      const total = len > 0 ? (sums[len - 1] as number) : 0
      // A clock stepping back still appends in order (the entry then counts a little longer).
      if (last >= now) sums[len - 1] = total + cost
      else {
        times.push(now)
        sums.push(total + cost)
      }
      return state
    },
    expiresAt(log: LogState) {
      const n = log.times.length
      return n === 0 ? 0 : (log.times[n - 1] as number) + w
    },
  }
}

/** Drops entries before `head`, rebasing the running sums. */
function compact(log: LogState): void {
  const base = sumBefore(log, log.head)
  log.times = log.times.slice(log.head)
  log.sums = log.sums.slice(log.head).map((s) => s - base)
  log.head = 0
}
