import type { Verdict } from './types.js'

/** Fills `out` (one writer for the three kinds of verdict below). */
function fill(
  out: Verdict,
  allowed: boolean,
  reason: Verdict['reason'],
  retryAfterMs: number,
  remaining: number,
  resetAfterMs: number,
  ttlMs: number,
  delayMs: number,
): void {
  out.allowed = allowed
  out.reason = reason
  out.retryAfterMs = retryAfterMs
  out.remaining = remaining
  out.resetAfterMs = resetAfterMs
  out.delayMs = delayMs
  out.ttlMs = ttlMs
}

/**
 * Fills `out` for a request whose cost exceeds what the policy can ever admit. Like every verdict,
 * `out.next` and `ttlMs` still describe the state if the cost were charged anyway (a forced
 * charge, used to sync counts that were admitted elsewhere).
 */
export function denyForever(out: Verdict, remaining: number, resetAfterMs: number, ttlMs: number): void {
  fill(out, false, 'cost-exceeds-limit', Infinity, remaining, resetAfterMs, ttlMs, 0)
}

/** Fills `out` for a denial that passes after `retryAfterMs`. */
export function deny(
  out: Verdict,
  retryAfterMs: number,
  remaining: number,
  resetAfterMs: number,
  ttlMs: number,
): void {
  fill(out, false, 'limit-exceeded', retryAfterMs, remaining, resetAfterMs, ttlMs, 0)
}

/** Fills `out` for an admission. */
export function admit(
  out: Verdict,
  remaining: number,
  resetAfterMs: number,
  ttlMs: number,
  delayMs = 0,
): void {
  fill(out, true, undefined, 0, remaining, resetAfterMs, ttlMs, delayMs)
}
