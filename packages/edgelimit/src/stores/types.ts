import type { DenyReason, Policy } from '../core/types.js'

/** One rule as a store sees it: plain data, so it can cross into Lua or a Durable Object. */
export interface StoreRule {
  readonly name: string
  readonly policy: Policy
}

/** One rule's outcome as a store returns it. */
export interface RuleVerdict {
  readonly allowed: boolean
  readonly remaining: number
  readonly resetAfterMs: number
  readonly retryAfterMs: number
  readonly delayMs: number
  readonly reason: DenyReason | undefined
}

/**
 * The rules of one limiter bound to a store. `evaluate` runs every rule for a key atomically and
 * all-or-nothing: the request is charged to every rule only if every rule admits it. When another
 * rule denies, an admitting rule's verdict describes its uncharged state (as a peek would).
 * `cost = 0` is a peek: it decides and writes nothing.
 */
export interface BoundRules {
  evaluate(key: string, cost: number, now: number): Promise<readonly RuleVerdict[]>
  /**
   * The synchronous form, for in-process stores. The returned array and its objects may be reused
   * by the next call: read them before calling again.
   */
  evaluateSync?(key: string, cost: number, now: number): readonly RuleVerdict[]
  /** Forgets every rule's state for `key`. */
  reset(key: string): Promise<void>
}

/**
 * Where counts live. A store is bound once per limiter to that limiter's rules; implementations
 * run the core (memory), a Lua script (Redis) or a Durable Object.
 *
 * @example
 * const store: Store = memoryStore({ maxKeys: 100_000 })
 */
export interface Store {
  readonly name: string
  bind(rules: readonly StoreRule[]): BoundRules
}
