import { type AlgorithmSpec, toPolicy } from '../../src/algorithms.js'
import { fingerprint } from '../../src/stores/fingerprint.js'
import { createIssues } from '../../src/validate.js'

/** The policy a rule's algorithm spec validates to (throws on an invalid spec). */
export function policyOf(spec: AlgorithmSpec) {
  const out = toPolicy(spec, 'algorithm', createIssues())
  if (out === undefined) throw new Error('invalid algorithm spec')
  return out.policy
}

/**
 * The Redis key of one rule's state for one client key, as redisStore writes it:
 * `<prefix>:<rule>:<fingerprint>:{<key>}` (rule name with `%` and `:` escaped; `key` as it goes in
 * the hash tag, already escaped by the caller when it needs to be).
 */
export function stateKey(prefix: string, rule: string, spec: AlgorithmSpec, key: string): string {
  return `${prefix}:${rule.replace(/[%:]/g, encodeURIComponent)}:${fingerprint(policyOf(spec))}:{${key}}`
}
