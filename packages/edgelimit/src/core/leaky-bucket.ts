import { compileMeter } from './bucket.js'
import { compileTat } from './tat.js'
import type { LeakyBucketPolicy, NumericRule } from './types.js'

/**
 * Leaky bucket (REFERENCE §2).
 * - `police`: a meter that starts empty and drains at leakRate / leakInterval; overflow is denied.
 *   Row `[level in fixed-point steps, lastMs]`; reported `limit` is the capacity.
 * - `shape`: a queue of `capacity` requests served one per T = leakInterval / leakRate; a request
 *   is admitted with `delayMs` (hold it that long) while its last unit starts within capacity·T.
 *   For cost 1 that is REFERENCE's "denied iff delay > Q·T"; a cost above capacity + 1 can never
 *   pass. Reported `limit` is capacity + 1 (what a fresh key admits at once).
 */
export function compileLeakyBucket(policy: LeakyBucketPolicy): NumericRule {
  if (policy.mode === 'police') {
    return compileMeter(policy, policy.capacity, policy.leakRate, policy.leakIntervalMs)
  }
  return compileTat(policy, policy.leakRate, policy.leakIntervalMs, policy.capacity + 1, true)
}
