import { monotonic } from '../clock.js'
import { EdgelimitError } from '../errors.js'

/** Runs `f` after pending I/O callbacks (Node, Bun, Deno: setImmediate), else on the next task. */
const defer: (f: () => void) => unknown =
  (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate ?? ((f) => setTimeout(f, 0))

/** The longest delay a timer holds (2^31 - 1 ms): a longer one fires at once. */
const MAX_TIMER = 2_147_483_647

/** The error of a store call that missed its deadline of `ms`. */
export const timedOut = (ms: number | undefined) =>
  new EdgelimitError('ERR_EDGELIMIT_TIMEOUT', `The store did not answer within ${ms} ms`)

/** One call on a deadline's clock (see `Deadline.watch`). */
export interface Watch {
  readonly at: number
  settled: boolean
  readonly fail: (error: Error) => void
  /** The call's own timer, on Workers. */
  t?: unknown
}

/** One deadline's clock, shared by every call (see `createDeadline`). */
export interface DeadlineClock {
  /**
   * Starts one call's clock with no promise of its own, for a caller that settles a promise of
   * its own anyway (one promise per decision instead of two): `fail` is called with
   * `ERR_EDGELIMIT_TIMEOUT` after `ms` unless `end` came first.
   */
  watch(fail: (error: Error) => void): Watch
  /** Stops a call's clock: `false` when it had expired already (`fail` was called). */
  end(watch: Watch): boolean
}

/** Runs store calls under one deadline (and exposes its clock). */
export interface Deadline extends DeadlineClock {
  <T>(work: Promise<T>): Promise<T>
}

/** A timer handle: an object with `ref`/`unref` in Node and Bun, a number elsewhere. */
interface Timer {
  ref?: () => unknown
  unref?: () => unknown
}

/**
 * A deadline of `ms` shared by every call of a limiter: each call settles with its work, or
 * rejects with `ERR_EDGELIMIT_TIMEOUT` after `ms`, whichever comes first. Calls share one timer
 * — the deadline is the same for all, so they expire in arrival order — instead of one timer
 * each. Where timers can be unref'd (Node, Bun) the timer is not cleared when the last pending
 * call settles: it stays armed, unref'd, so that calls one after another do not each arm and clear
 * a timer; it fires at most once per `ms`, and only holds the process while calls are pending.
 * Elsewhere it runs only while calls are pending. On Workers a timer belongs to the request that
 * set it and is cancelled when that request ends, so one shared by the calls of concurrent requests
 * would leave theirs without a deadline: there each call has a timer of its own. A late rejection
 * of abandoned work is swallowed (the decision was already made without it), so nothing leaks.
 *
 * @example const deadline = createDeadline(45); await deadline(store.evaluate(key, 1, now))
 */
export function createDeadline(ms: number): Deadline {
  return callable(deadlineClock(ms, true))
}

/**
 * The clock of `createDeadline(ms)` alone, for a caller that settles a promise of its own (the
 * remote decision path). `keep`: whether an unref'able timer stays armed once nothing is pending.
 */
export function deadlineClock(ms: number, keep: boolean): DeadlineClock {
  let queue: Watch[] = []
  let head = 0
  // When armed, the timer fires at or before every pending call's deadline: deadlines are `ms`
  // after arrival, so they come in arrival order, and the timer is armed for the oldest.
  let timer: Timer | undefined
  let live = 0
  // Workers: each call's timer is set, and cleared, in the request that made the call.
  const own = globalThis.navigator?.userAgent === 'Cloudflare-Workers'

  // Stops `p`'s clock: `false` when it had stopped already.
  function end(p: Watch): boolean {
    if (p.settled) return false
    p.settled = true
    if (p.t) clearTimeout(p.t as number)
    if (--live > 0) return true
    // Nothing pending: forget the queue (one call at a time: a pop, cheaper than setting the
    // length). An unref'd timer may stay armed (it no longer holds the process, and re-arming
    // one per call costs more than letting it fire once); else it goes.
    if (queue.length === 1) queue.pop()
    else queue.length = 0
    head = 0
    if (timer === undefined) return true
    if (keep && typeof timer.unref === 'function') timer.unref()
    else {
      clearTimeout(timer as ReturnType<typeof setTimeout>)
      timer = undefined
    }
    return true
  }

  function sweep(): void {
    timer = undefined
    const now = monotonic()
    while (head < queue.length) {
      const p = queue[head] as Watch
      if (!p.settled && p.at > now) break
      head++
      if (end(p)) p.fail(timedOut(ms))
    }
    if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head)
      head = 0
    }
    arm(now)
  }

  function arm(now: number): void {
    // Settled calls at the front no longer need the timer (with none pending, the last one to
    // settle emptied the queue).
    while (head < queue.length && (queue[head] as Watch).settled) head++
    if (head < queue.length && timer === undefined) {
      // After a pause of the event loop (a long GC, a busy CPU) the timer fires before replies
      // that already arrived are read: one I/O turn passes before anything late is called. At
      // most 2e9 ms: a timer above 2^31 - 1 ms fires at once (the sweep arms it again until the
      // deadline). A delay below 0 is 0.
      timer = setTimeout(() => defer(sweep), Math.min(2e9, (queue[head] as Watch).at - now)) as Timer
    }
  }

  function watch(fail: (error: Error) => void): Watch {
    const now = monotonic()
    const pending: Watch = { at: now + ms, settled: false, fail }
    // A timer kept armed while idle holds the process again (it fires before this deadline).
    if (live++ === 0 && timer?.ref !== undefined) timer.ref()
    if (own) pending.t = setTimeout(() => defer(() => end(pending) && fail(timedOut(ms))), ms)
    else {
      queue.push(pending)
      if (timer === undefined) arm(now)
    }
    return pending
  }

  return { watch, end }
}

/** A clock as a function: each call settles with its work, or rejects when its time is up. */
function callable(clock: DeadlineClock): Deadline {
  const deadline = <T>(work: Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const pending = clock.watch(reject)
      work.then(
        (value) => {
          if (clock.end(pending)) resolve(value)
        },
        (error: unknown) => {
          if (clock.end(pending)) reject(error)
        },
      )
    })
  return Object.assign(deadline, clock)
}

/**
 * Settles with `work`, or rejects with `ERR_EDGELIMIT_TIMEOUT` after `ms` — a one-off deadline.
 * @example await withDeadline(fetchSomething(), 45)
 */
export function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return callable(deadlineClock(ms, false))(work)
}

/**
 * `true` once `work` settles, or `false` after `ms`, whichever comes first; the timer goes at once.
 * For work that never rejects (a drain, `Promise.allSettled`, a flush that reports its failures):
 * how long to wait for it, not whether it failed.
 * @example if (!(await within(drained, 5_000))) log.warn('still busy')
 */
export function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<boolean>((resolve) => {
    // A timer holds at most 2^31 - 1 ms (about 24.8 days; a longer one fires after 1 ms): a
    // longer wait (a '30d' timeout, 4 intervals of '7d') is timed in steps.
    const wait = (left: number) => {
      timer =
        left > MAX_TIMER ? setTimeout(wait, MAX_TIMER, left - MAX_TIMER) : setTimeout(resolve, left, false)
    }
    wait(ms)
  })
  return Promise.race([work.then(() => true), late]).then((settled) => {
    clearTimeout(timer)
    return settled
  })
}
