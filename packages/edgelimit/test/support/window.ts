/**
 * Windows that a test's run never sees end. Fixed windows and sliding-window counters are aligned
 * to the epoch (`[kW, (k+1)W)`), so a test that counts in one on a clock it cannot set (Redis
 * `TIME`, a Durable Object's, a spawned gateway's or any other system clock) admits a window's
 * worth more, or sees the previous window's weight start to fall, when its run spans a boundary:
 * a 1-hour window's at every XX:00:00, and even a 365-day window's once a year, at an instant that
 * drifts back a day every four years (2026-12-18T00:00:00Z, 2027-12-18, …).
 *
 * The servers tests start run on this machine: Redis `TIME`, workerd's `Date.now()` (the time of
 * the last I/O, a little behind) and a child process's read the clock `Date.now()` reads here, so
 * a margin of a day on both sides dwarfs any gap between them and any test file's run.
 */

const DAY_MS = 86_400_000

/**
 * A window of 365 or 366 days whose epoch-aligned window holding `now` began at least a day before
 * and ends at least a day after it. Pick it before counting: once per test file, or per test.
 *
 * @example const WINDOW = farWindow() // '366d' from 2026-12-17 to 2026-12-19
 * fixedWindow({ limit: 3, window: WINDOW })
 */
export function farWindow(now = Date.now()): '365d' | '366d' {
  // A 366-day window's ends fall about k days from a 365-day one's (k: the windows since the epoch,
  // 56 in 2026), so one of the two is a day clear, for every `now` from 1972 to 2332
  // (window.test.ts checks each hour).
  const into = now % (365 * DAY_MS)
  return into >= DAY_MS && 365 * DAY_MS - into >= DAY_MS ? '365d' : '366d'
}

/**
 * Whether a window of one of these lengths (ms) ended between `from` and `to`: a run that spanned
 * the end of one counted in two windows.
 *
 * @example crossedBoundary([60_000], 59_990, 60_010) // true
 */
export function crossedBoundary(windowsMs: readonly number[], from: number, to: number): boolean {
  return windowsMs.some((w) => Math.floor(from / w) !== Math.floor(to / w))
}
