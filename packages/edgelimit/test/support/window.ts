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

// farWindow() is plain JavaScript, so that bench/approximate.mjs picks its window the same way.
export { farWindow } from './far-window.mjs'

/**
 * Whether a window of one of these lengths (ms) ended between `from` and `to`: a run that spanned
 * the end of one counted in two windows.
 *
 * @example crossedBoundary([60_000], 59_990, 60_010) // true
 */
export function crossedBoundary(windowsMs: readonly number[], from: number, to: number): boolean {
  return windowsMs.some((w) => Math.floor(from / w) !== Math.floor(to / w))
}
