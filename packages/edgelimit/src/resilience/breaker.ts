import type { Duration } from '../duration.js'

/**
 * Options of the circuit breaker in front of a remote store, checked by `createLimiter` (a bad one
 * is a `ConfigError` with its path, e.g. `breaker.sampleSize`).
 *
 * @example breaker: { failureRatio: 0.5, sampleSize: 20, minimumCalls: 10, openMs: '1s' }
 */
export interface BreakerOptions {
  /** Opens when at least this share of the recent calls failed: above 0, at most 1. @default 0.5 */
  failureRatio?: number
  /** How many recent calls the ratio is taken over (a sliding sample): 1 to 10,000. @default 20 */
  sampleSize?: number
  /**
   * Calls needed in the sample before the breaker may open: 1 to `sampleSize`.
   * @default 10, or `sampleSize` when smaller
   */
  minimumCalls?: number
  /** How long the breaker stays open before letting a probe through. @default '1s' */
  openMs?: Duration
}

/** The breaker's options as validated: every one set, `openMs` in milliseconds. */
export interface BreakerConfig {
  readonly failureRatio: number
  readonly sampleSize: number
  readonly minimumCalls: number
  readonly openMs: number
}

/** The breaker's state, as reported in events and metrics. */
export type BreakerState = 'closed' | 'open' | 'half-open'

/** A circuit breaker driven by an injected clock (no timers). */
export interface Breaker {
  /**
   * Whether a call may go to the store now (in half-open, one probe at a time, for `openMs` at
   * most: then another goes): a ticket for `record`, or `0` when not.
   */
  allow(now: number): number
  /**
   * Records the outcome of the call `allow` gave `ticket`. Once the breaker has left closed, only
   * the probe's outcome counts: calls admitted before it opened are ignored, then and after.
   */
  record(ticket: number, ok: boolean, now: number): void
  readonly state: BreakerState
  /** When an open breaker will let the next probe through. */
  readonly reopensAt: number
}

/**
 * Creates a breaker: opens on a failure ratio over a sliding sample of calls, answers without the
 * store while open, lets one probe through after `openMs` (half-open) and closes on its success.
 *
 * @example
 * const b = createBreaker(
 *   { failureRatio: 0.5, sampleSize: 20, minimumCalls: 10, openMs: 1000 },
 *   (s) => console.log('breaker', s),
 * )
 */
export function createBreaker(config: BreakerConfig, onChange?: (state: BreakerState) => void): Breaker {
  const { failureRatio: ratio, sampleSize: size, minimumCalls: minimum, openMs } = config
  const sample = new Uint8Array(size)
  let calls = 0
  let failures = 0
  let cursor = 0
  let state: BreakerState = 'closed'
  let reopensAt = 0
  // Changes with the state: a ticket from before a change is stale. Open hands out none, and
  // half-open one, the probe's.
  let epoch = 1

  // `until`: the next probe's time. Returns the new epoch; a change of state is reported.
  const move = (next: BreakerState, until: number) => {
    epoch++
    reopensAt = until
    if (state !== next) {
      state = next
      onChange?.(next)
    }
    return epoch
  }

  return {
    allow(now) {
      if (state === 'closed') return epoch
      // A probe out for openMs with no outcome (a lost reply, with no deadline) gives way to another.
      return now < reopensAt ? 0 : move('half-open', now + openMs)
    },
    record(ticket, ok, now) {
      if (ticket !== epoch) return
      if (state !== 'closed') {
        if (ok) {
          sample.fill(0)
          calls = failures = cursor = 0
          move('closed', 0)
        } else move('open', now + openMs)
        return
      }
      if (calls === size) failures -= sample[cursor] as number
      else calls++
      failures += sample[cursor] = ok ? 0 : 1
      cursor = (cursor + 1) % size
      if (calls >= minimum && failures / calls >= ratio) move('open', now + openMs)
    },
    get state() {
      return state
    },
    get reopensAt() {
      return reopensAt
    },
  }
}
