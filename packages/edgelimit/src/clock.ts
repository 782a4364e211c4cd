import { ConfigError } from './errors.js'
import { createIssues } from './validate.js'

/**
 * A source of integer milliseconds since the epoch. A reading that is not a non-negative safe
 * integer fails the decision with `ERR_EDGELIMIT_CLOCK` (never a silent admission).
 */
export interface Clock {
  now(): number
}

/**
 * The system clock: the only place edgelimit reads the time. On Cloudflare Workers `Date.now()`
 * advances only between I/O events; that is the platform's clock and it is used as is.
 */
export const systemClock: Clock = { now: () => Date.now() }

/** Monotonic fractional ms, for measuring latency and deadlines (never for decisions). */
export function monotonic(): number {
  return performance.now()
}

/** Options of `coarseClock`. */
export interface CoarseClockOptions {
  /** The time it caches, in integer ms. @default Date.now */
  source?: () => number
  /** The most reads that one reading of `source` serves (1: no caching). @default 32 */
  reads?: number
}

/**
 * An opt-in clock for hot in-process limiters: it reads `source` (the system clock) once for a
 * burst of decisions instead of once per decision, which is most of a memory-store decision's
 * cost. It is not the default: a decision may then use a time up to about a millisecond old.
 *
 * - One reading serves at most `reads` reads, and only within one run of JavaScript: the cache
 *   is dropped once the microtask queue goes quiet, so a new task (a request, a timer, I/O)
 *   always reads the source. No timers.
 * - It follows the pace of reads: from how many reads came between the last two ticks of the
 *   source, it serves as many reads per reading as come in half a millisecond (at least 1: reads
 *   further apart are not cached at all). At a steady pace a reading is therefore never a whole
 *   millisecond old. The pace is learned from the reads before, though: if a task that was
 *   deciding quickly starts long synchronous work between decisions, the rest of the current
 *   burst (at most `reads` − 1 decisions) still uses the burst's reading.
 * - It returns only times the source returned, never ahead of it: a late time is a request seen
 *   slightly earlier, so windows and buckets are never more permissive.
 *
 * @example
 * const limiter = createLimiter({ rules, clock: coarseClock() })
 * for (const key of batch) limiter.limitSync(key) // one Date.now() per burst of decisions
 */
export function coarseClock(options: CoarseClockOptions = {}): Clock {
  const issues = createIssues()
  if (issues.object('options', options, 'source reads')) {
    issues.function('source', options.source)
    issues.integer('reads', options.reads ?? 32, 1, Number.MAX_SAFE_INTEGER)
  }
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  const source = options.source ?? Date.now
  const reads = options.reads ?? 32
  /** The current reading, and how many more reads it serves. */
  let time = Number.NaN
  let left = 0
  /** Reads per reading now, from the pace: reads counted since the source last ticked (at `tick`). */
  let budget = 1
  let tick = Number.NaN
  let count = 0
  /** A check is queued; `used`: the reading was served since the last check; `quiet`: checks without. */
  let armed = false
  let used = false
  let quiet = 0
  const settled = Promise.resolve()
  // Drops the reading once two microtask hops pass without a read: the queue is draining, and
  // whatever runs next (a new task) reads the source. A loop of awaited decisions keeps it.
  const check = (): void => {
    if (used) {
      used = false
      quiet = 0
    } else if (++quiet === 2) {
      armed = false
      left = 0
      return
    }
    void settled.then(check)
  }
  return {
    now() {
      count++
      if (left > 0) {
        left--
        used = true
        return time
      }
      const t = source()
      if (t !== time) {
        // The source ticked: `count` reads came in `t - tick` ms; serve half a millisecond's worth.
        const perMs = count / (t - tick)
        budget = perMs >= 2 ? Math.min(Math.floor(perMs / 2), reads) : 1
        tick = t
        count = 0
        time = t
      }
      left = budget - 1
      if (!armed) {
        armed = true
        used = false
        quiet = 0
        void settled.then(check)
      }
      return t
    },
  }
}
