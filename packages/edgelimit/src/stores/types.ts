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
  /** `store-unavailable` only from a limiter's fail-closed fallback, never from a store. */
  readonly reason: DenyReason | 'store-unavailable' | undefined
}

/** Per-call options of `evaluate`: plain data, so they cross into Lua or a Durable Object. */
export interface EvaluateOptions {
  /**
   * Rules in shadow for this call (bit i = rule i): their denials do not block the request; a
   * shadow rule is charged only when it admits, so it counts exactly as if it were enforced.
   */
  readonly shadow?: number
  /**
   * Charge every rule whatever it decides: syncing counts that were already admitted elsewhere
   * (approximate consistency). The verdicts still report what the rules decided.
   */
  readonly force?: boolean
}

/**
 * The rules of one limiter bound to a store. `evaluate` runs every rule for a key atomically and
 * all-or-nothing: the request is charged to every rule only if every enforced rule admits it.
 * When another rule denies, an admitting rule's verdict describes its uncharged state (as a peek
 * would).
 * `cost = 0` is a peek: it decides and writes nothing.
 */
export interface BoundRules {
  evaluate(key: string, cost: number, now: number, options?: EvaluateOptions): Promise<readonly RuleVerdict[]>
  /**
   * The synchronous form, for in-process stores. The returned array and its objects may be reused
   * by the next call: read them before calling again.
   */
  evaluateSync?(key: string, cost: number, now: number, options?: EvaluateOptions): readonly RuleVerdict[]
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
