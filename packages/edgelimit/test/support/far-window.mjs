// farWindow() in plain JavaScript, for the benchmarks (bench/approximate.mjs) as well as the
// tests (window.ts re-exports it, with the reasons): one copy of the arithmetic.

const DAY_MS = 86_400_000

/**
 * A window of 365 or 366 days whose epoch-aligned window holding `now` began at least a day before
 * and ends at least a day after it. Pick it before counting: once per test file, or per test.
 *
 * @example const WINDOW = farWindow() // '366d' from 2026-12-17 to 2026-12-19
 * fixedWindow({ limit: 3, window: WINDOW })
 */
export function farWindow(now = Date.now()) {
  // A 366-day window's ends fall about k days from a 365-day one's (k: the windows since the epoch,
  // 56 in 2026), so one of the two is a day clear, for every `now` from 1972 to 2332
  // (window.test.ts checks each hour).
  const into = now % (365 * DAY_MS)
  return into >= DAY_MS && 365 * DAY_MS - into >= DAY_MS ? '365d' : '366d'
}
