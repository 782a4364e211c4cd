import { admit, deny, denyForever } from './deny.js'
import type { FixedWindowPolicy, NumericRule, Row, Verdict } from './types.js'

/**
 * Fixed window (REFERENCE §2). Row: `[windowIndex, count]`.
 * Windows are aligned to the epoch; `count` belongs to window `windowIndex` only.
 */
export function compileFixedWindow(policy: FixedWindowPolicy): NumericRule {
  const { limit, windowMs: w } = policy
  return {
    kind: 'numeric',
    policy,
    limit,
    periodMs: w,
    width: 2,
    decide(row: Row, o: number, now: number, cost: number, out: Verdict) {
      // A clock stepping back stays in the newest window charged: a lagging clock admits no more.
      const k = Math.max(Math.floor(now / w), row[o] as number)
      const count = row[o] === k ? (row[o + 1] as number) : 0
      const toEnd = (k + 1) * w - now
      const after = count + cost
      out.next[0] = k
      out.next[1] = after
      const ttl = after > 0 ? toEnd : 0
      // A forced charge (a sync of counts admitted elsewhere) can take count past the limit.
      const left = Math.max(0, limit - count)
      if (cost > limit) return denyForever(out, left, count > 0 ? toEnd : 0, ttl)
      if (after > limit) return deny(out, toEnd, left, toEnd, ttl)
      admit(out, limit - after, ttl, ttl)
    },
    expiresAt(row: Row, o: number) {
      return ((row[o] as number) + 1) * w
    },
  }
}
