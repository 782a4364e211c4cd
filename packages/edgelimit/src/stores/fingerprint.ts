import type { Policy } from '../core/types.js'

/**
 * FNV-1a (32 bits) over the UTF-16 code units: the same number for the same text in every
 * process, runtime and release.
 */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/**
 * A rule's state identity beside its name: FNV-1a over the policy's JSON (its algorithm and every
 * parameter, in the fixed order the factories build it), in base 36: up to 7 characters. Remote
 * stores keep a rule's state under its name and this, so limiters that reuse a name with another
 * policy, or a deploy that changes a rule's parameters, start fresh instead of misreading each
 * other's state (docs/decisions/0014-state-identity.md).
 *
 * @example fingerprint({ algorithm: 'fixed-window', limit: 3, windowMs: 60000 }) // up to 7 base-36 characters
 */
export const fingerprint = (policy: Policy): string => fnv1a(JSON.stringify(policy)).toString(36)
