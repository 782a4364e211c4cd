import { admit, deny, denyForever } from './deny.js'
import { ceilDiv, floorDiv, gcd } from './math.js'
import type { NumericRule, Policy, Row, Verdict } from './types.js'

/**
 * The theoretical-arrival-time scheduler behind GCRA and the shaping leaky bucket. One emission
 * interval T = intervalMs / count ms is kept exact by measuring time in steps of 1/k ms
 * (k = count / g, g = gcd), so T = intervalMs / g steps. Row: `[tatMs, tatSteps]`, the TAT being
 * `tatMs + tatSteps / k` with `0 ≤ tatSteps < k`; a TAT in the past is a fresh key.
 *
 * `slots` is how many emission intervals may be outstanding: GCRA's burst B (admit while
 * newTAT − now ≤ B·T), or Q + 1 for a shaping queue of Q (admit while the last unit of the
 * request starts within Q·T, and report how long the caller must hold it).
 */
export function compileTat(
  policy: Policy,
  count: number,
  intervalMs: number,
  slots: number,
  shape: boolean,
): NumericRule {
  const g = gcd(count, intervalMs)
  const k = count / g
  const t = intervalMs / g
  const horizon = slots * t
  return {
    kind: 'numeric',
    policy,
    limit: slots,
    periodMs: (slots * intervalMs) / count,
    width: 2,
    decide(row: Row, o: number, now: number, cost: number, out: Verdict) {
      const tatMs = row[o] as number
      const tatSteps = row[o + 1] as number
      // Steps between now and the TAT, 0 when the TAT has passed.
      const wait = tatMs > now || (tatMs === now && tatSteps > 0) ? (tatMs - now) * k + tatSteps : 0
      const after = wait + cost * t
      const q = floorDiv(after, k)
      out.next[0] = now + q
      out.next[1] = after - q * k
      const ttl = ceilDiv(after, k)
      const remaining = floorDiv(Math.max(0, horizon - wait), t)
      if (cost > slots) return denyForever(out, remaining, ceilDiv(wait, k), ttl)
      if (after > horizon) return deny(out, ceilDiv(after - horizon, k), remaining, ceilDiv(wait, k), ttl)
      admit(out, floorDiv(horizon - after, t), ttl, ttl, shape ? ceilDiv(wait, k) : 0)
    },
    expiresAt(row: Row, o: number) {
      return (row[o] as number) + ((row[o + 1] as number) > 0 ? 1 : 0)
    },
  }
}
