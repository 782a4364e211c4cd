import type { Clock } from '../clock.js'

/** A clock that moves only when told: for tests and simulations. */
export interface ManualClock extends Clock {
  /** Sets the time (integer ms). */
  set(ms: number): void
  /** Moves the time forward by `ms`. */
  advance(ms: number): void
}

/**
 * Creates a manual clock starting at `start` ms.
 * @example
 * const clock = manualClock(0)
 * const limiter = createLimiter({ rules, clock })
 * clock.advance(1000)
 */
export function manualClock(start = 0): ManualClock {
  let t = start
  return {
    now: () => t,
    set(ms: number) {
      t = ms
    },
    advance(ms: number) {
      t += ms
    },
  }
}
