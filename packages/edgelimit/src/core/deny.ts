import type { Verdict } from './types.js'

/**
 * Fills `out` for a request whose cost exceeds what the policy can ever admit. Like every verdict,
 * `out.next` and `ttlMs` still describe the state if the cost were charged anyway (a forced
 * charge, used to sync counts that were admitted elsewhere).
 */
export function denyForever(out: Verdict, remaining: number, resetAfterMs: number, ttlMs: number): void {
  out.allowed = false
  out.reason = 'cost-exceeds-limit'
  out.retryAfterMs = Number.POSITIVE_INFINITY
  out.remaining = remaining
  out.resetAfterMs = resetAfterMs
  out.delayMs = 0
  out.ttlMs = ttlMs
}

/** Fills `out` for a denial that passes after `retryAfterMs`. */
export function deny(
  out: Verdict,
  retryAfterMs: number,
  remaining: number,
  resetAfterMs: number,
  ttlMs: number,
): void {
  out.allowed = false
  out.reason = 'limit-exceeded'
  out.retryAfterMs = retryAfterMs
  out.remaining = remaining
  out.resetAfterMs = resetAfterMs
  out.delayMs = 0
  out.ttlMs = ttlMs
}

/** Fills `out` for an admission. */
export function admit(
  out: Verdict,
  remaining: number,
  resetAfterMs: number,
  ttlMs: number,
  delayMs = 0,
): void {
  out.allowed = true
  out.reason = undefined
  out.retryAfterMs = 0
  out.remaining = remaining
  out.resetAfterMs = resetAfterMs
  out.delayMs = delayMs
  out.ttlMs = ttlMs
}
