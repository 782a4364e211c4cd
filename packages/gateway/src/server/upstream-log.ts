import type { Clock } from 'edgelimit'
import type { Logger } from 'pino'

/** Upstream failures logged one by one per reason and second; those past it are summed up. */
const UPSTREAM_FAILURES_PER_SECOND = 10
const WINDOW_MS = 1_000

/** A request the upstream failed: the status the client got (`aborted`: cut off mid-body). */
export interface UpstreamFailure {
  readonly status: number | 'aborted'
  readonly error: Error & { code?: string }
  readonly method: string | undefined
  readonly path: string | undefined
}

interface Window {
  start: number
  logged: number
  suppressed: number
  timer: NodeJS.Timeout | undefined
}

/** Where upstream failures are logged (`upstreamFailureLog`). */
export interface UpstreamFailureLog {
  /** Logs one failure, or counts it when its reason had its 10 lines this second. */
  failed(failure: UpstreamFailure): void
  /**
   * Writes the summary line of every second that has failures not logged yet, at once (the
   * gateway stops: its timer would fire after the last line, or never).
   */
  flush(): void
}

/**
 * Logs each upstream failure (`upstream failed`, a warning), at most `UPSTREAM_FAILURES_PER_SECOND`
 * per reason (the error's code, else its name) in a second that begins with the first of them;
 * the rest of that second is summed up in one line (`upstream failures not logged`) when the
 * second ends (an unref'd timer), the next failure comes after it, or `flush()` is called (the
 * gateway stops), whichever is first. An outage writes at most 10 lines a second per reason, and
 * every failure is logged or counted in one.
 *
 * @example
 * const upstream = upstreamFailureLog(log, systemClock)
 * upstream.failed({ status: 502, error, method: 'GET', path: '/orders' })
 * upstream.flush() // on shutdown
 */
export function upstreamFailureLog(log: Logger, clock: Clock): UpstreamFailureLog {
  const windows = new Map<string, Window>()
  const summarize = (reason: string, w: Window): void => {
    clearTimeout(w.timer)
    w.timer = undefined
    if (w.suppressed === 0) return
    log.warn(
      { reason, suppressed: w.suppressed, since: new Date(w.start).toISOString() },
      'upstream failures not logged: more than 10 in a second for one reason',
    )
    w.suppressed = 0
  }
  const failed = ({ status, error, method, path }: UpstreamFailure): void => {
    const reason = error.code ?? error.name
    const now = clock.now()
    let w = windows.get(reason)
    if (w === undefined || now - w.start >= WINDOW_MS) {
      if (w !== undefined) summarize(reason, w)
      w = { start: now, logged: 0, suppressed: 0, timer: undefined }
      windows.set(reason, w)
    }
    if (w.logged < UPSTREAM_FAILURES_PER_SECOND) {
      w.logged++
      log.warn({ status, reason, err: error.message, method, path }, 'upstream failed')
      return
    }
    w.suppressed++
    if (w.timer === undefined) {
      const window = w
      window.timer = setTimeout(() => summarize(reason, window), Math.max(0, w.start + WINDOW_MS - now))
      window.timer.unref()
    }
  }
  return {
    failed,
    flush() {
      for (const [reason, w] of windows) summarize(reason, w)
    },
  }
}
