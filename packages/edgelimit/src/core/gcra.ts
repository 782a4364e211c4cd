import { compileTat } from './tat.js'
import type { GcraPolicy, NumericRule } from './types.js'

/**
 * GCRA (REFERENCE §2): T = period / limit, τ = burst · T; admit iff max(TAT, now) + c·T − now ≤ τ.
 * `limit / period` is the sustained rate; with burst = limit up to 2·limit − 1 requests can pass
 * in one span of `period` (a burst, then the refills). Reported `limit` is the burst.
 */
export function compileGcra(policy: GcraPolicy): NumericRule {
  return compileTat(policy, policy.limit, policy.periodMs, policy.burst, false)
}
