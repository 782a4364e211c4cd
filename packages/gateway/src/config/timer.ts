import { describe } from '../library.js'
import type { Checker } from './checker.js'
import type { Path } from './issues.js'

/**
 * The longest duration of a setting that arms a timer: a Node timer of more than 2^31 - 1 ms
 * (24.8 days) fires at once, so an Upstash timeout of 30 days would abort every store call. (A
 * rule's store deadline is not bounded: the library times a longer wait in steps.)
 */
export const MAX_TIMER_MS = 24 * 86_400_000

/**
 * A duration that arms one timer (`clients` and `upstream` timeouts, an Upstash store's `timeout`): as
 * `Checker.duration`, and at most 24 days (`ERR_RANGE`).
 *
 * @example timerDuration(c, ['store', 'timeout'], '30d') // undefined, with an ERR_RANGE issue
 */
export function timerDuration(c: Checker, path: Path, value: unknown): number | undefined {
  const ms = c.duration(path, value)
  if (ms === undefined || ms <= MAX_TIMER_MS) return ms
  c.add(path, 'ERR_RANGE', `expected at most 24d (Node's timer limit), got ${describe(value)}`)
  return undefined
}
