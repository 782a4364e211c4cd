import { admit, deny, denyForever } from './deny.js'
import { ceilDiv, floorDiv, gcd } from './math.js'
import type { NumericRule, Policy, Row, Verdict } from './types.js'

/**
 * The shared meter behind the token bucket and the policing leaky bucket: a level that drains
 * continuously at `rate / intervalMs` and admits while `level + cost ≤ capacity`. A token bucket's
 * level is its missing tokens (fresh = full = 0); a leaky bucket's is its fill (fresh = empty = 0).
 *
 * Exact: one unit is `intervalMs / g` fixed-point steps and the level drains `rate / g` steps per
 * ms (g = gcd), so the level is always an integer and no fraction of a refill is lost.
 * Row: `[level in steps, lastMs]`.
 */
export function compileMeter(
  policy: Policy,
  capacity: number,
  rate: number,
  intervalMs: number,
): NumericRule {
  const g = gcd(rate, intervalMs)
  const unit = intervalMs / g
  const perMs = rate / g
  const full = capacity * unit
  return {
    kind: 'numeric',
    policy,
    limit: capacity,
    periodMs: (capacity * intervalMs) / rate,
    width: 2,
    decide(row: Row, o: number, now: number, cost: number, out: Verdict) {
      const stored = row[o] as number
      const last = row[o + 1] as number
      // A clock that steps back never refills twice: time resumes from the last instant seen.
      const at = stored > 0 && last > now ? last : now
      const skew = at - now
      let level = 0
      if (stored > 0) {
        const drained = (at - last) * perMs
        level = drained >= stored ? 0 : stored - drained
      }
      const after = level + cost * unit
      out.next[0] = after
      out.next[1] = at
      const ttl = skew + ceilDiv(after, perMs)
      if (cost > capacity) {
        return denyForever(out, floorDiv(Math.max(0, full - level), unit), skew + ceilDiv(level, perMs), ttl)
      }
      if (after > full) {
        return deny(
          out,
          skew + ceilDiv(after - full, perMs),
          floorDiv(Math.max(0, full - level), unit),
          skew + ceilDiv(level, perMs),
          ttl,
        )
      }
      admit(out, floorDiv(full - after, unit), ttl, ttl)
    },
    expiresAt(row: Row, o: number) {
      return (row[o + 1] as number) + ceilDiv(row[o] as number, perMs)
    },
  }
}
