import { compileMeter } from './bucket.js'
import type { NumericRule, TokenBucketPolicy } from './types.js'

/**
 * Token bucket (REFERENCE §2): starts full, refills continuously and exactly.
 * Row: `[missing tokens in fixed-point steps, lastMs]`.
 */
export function compileTokenBucket(policy: TokenBucketPolicy): NumericRule {
  return compileMeter(policy, policy.capacity, policy.refillRate, policy.refillIntervalMs)
}
