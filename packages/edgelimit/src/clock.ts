/** A source of integer milliseconds since the epoch. */
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
