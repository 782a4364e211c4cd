import type { Policy } from '../../core/types.js'
import { fingerprint, fnv1a } from '../fingerprint.js'
import type { RuleVerdict } from '../types.js'

/**
 * One decision asked of the Durable Object over RPC: plain data, structured-cloned. `rules` is
 * the limiter's rule set as JSON (`[[name, policy], …]`), computed once per bind; the object
 * compiles each distinct set once.
 */
export interface EvaluateRequest {
  readonly rules: string
  readonly key: string
  readonly cost: number
  /** The caller's time (`clock: 'client'`); absent, the object reads its own clock. */
  readonly now?: number | undefined
  /** Shadow rules (bit i = rule i), as `EvaluateOptions.shadow`. */
  readonly shadow?: number | undefined
  readonly force?: boolean | undefined
}

/** Forgets the state of `key` for the rules of one rule set. */
export interface ResetRequest {
  readonly rules: string
  readonly key: string
}

/** The RPC surface of `EdgelimitDurableObject`, as a stub sees it. */
export interface EdgelimitStub {
  evaluate(request: EvaluateRequest): Promise<readonly RuleVerdict[]>
  reset(request: ResetRequest): Promise<void>
}

/** A rule set on the wire: rule names and validated policies, in the limiter's order. */
export type RuleSpec = readonly (readonly [name: string, policy: Policy])[]

/**
 * The wire form of a rule set: stable for equal rule sets, so the object compiles each once. Each
 * rule is named `<name>:<fingerprint>`, the identity of its rows: a rule reused with another
 * policy, or changed by a deploy, starts fresh (docs/decisions/0014-state-identity.md).
 */
export function encodeRules(rules: readonly { readonly name: string; readonly policy: Policy }[]): string {
  return JSON.stringify(rules.map((r) => [`${r.name}:${fingerprint(r.policy)}`, r.policy]))
}

/**
 * A stable shard for `key` in `[0, shards)`: FNV-1a over the UTF-16 code units, so the same key
 * maps to the same object from every isolate and every release.
 *
 * @example shardOf('ip:abc', 16) // 0…15, the same everywhere
 */
export const shardOf = (key: string, shards: number): number => fnv1a(key) % shards
