import { admit, deny, denyForever } from './deny.js'
import { ceilDiv, floorDiv } from './math.js'
import type { NumericRule, Row, SlidingWindowPolicy, Verdict } from './types.js'

/**
 * Sliding-window counter (REFERENCE §2). Row: `[windowIndex, cur, prev]`.
 * estimate = cur + floor(prev · (W − e) / W), e = time into the current window.
 */
export function compileSlidingWindow(policy: SlidingWindowPolicy): NumericRule {
  const { limit, windowMs: w } = policy
  return {
    kind: 'numeric',
    policy,
    limit,
    periodMs: w,
    width: 3,
    decide(row: Row, o: number, now: number, cost: number, out: Verdict) {
      const sk = row[o] as number
      // A clock stepping back is evaluated at the start of the newest window charged (e = 0):
      // a lagging clock admits no more.
      const k = Math.max(Math.floor(now / w), sk)
      const start = k * w
      const e = Math.max(0, now - start)
      let cur = 0
      let prev = 0
      if (sk === k) {
        cur = row[o + 1] as number
        prev = row[o + 2] as number
      } else if (sk === k - 1) prev = row[o + 1] as number
      const estimate = cur + (prev > 0 ? floorDiv(prev * (w - e), w) : 0)
      const after = cur + cost
      out.next[0] = k
      out.next[1] = after
      out.next[2] = prev
      const ttl = resetAfter(w, start, now, after, prev)
      if (cost > limit) {
        return denyForever(out, Math.max(0, limit - estimate), resetAfter(w, start, now, cur, prev), ttl)
      }
      if (estimate + cost > limit) {
        const room = limit - cost - cur
        // Within this window the weighted part must fall to `room`; else wait for the next window,
        // where the current count becomes the weighted previous one.
        const retryAt =
          room >= 0
            ? start + w - ceilDiv((room + 1) * w, prev) + 1
            : start + w + Math.max(0, w - ceilDiv((limit - cost + 1) * w, cur) + 1)
        return deny(
          out,
          retryAt - now,
          Math.max(0, limit - estimate),
          resetAfter(w, start, now, cur, prev),
          ttl,
        )
      }
      admit(out, limit - estimate - cost, ttl, ttl)
    },
    expiresAt(row: Row, o: number) {
      return ((row[o] as number) + 2) * w
    },
  }
}

/** The first instant (relative to now) at which the estimate reaches 0. */
function resetAfter(w: number, start: number, now: number, cur: number, prev: number): number {
  // A count c weighs floor(c · (W − e) / W) as "previous": 0 once e ≥ W − ceil(W / c) + 1.
  if (cur > 0) return start + w + (w - ceilDiv(w, cur) + 1) - now
  if (prev > 0) return Math.max(0, start + (w - ceilDiv(w, prev) + 1) - now)
  return 0
}
