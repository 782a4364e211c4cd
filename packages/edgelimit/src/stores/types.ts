import type { Clock } from '../clock.js'
import type { CompiledRule } from '../core/index.js'
import type { DenyReason, Policy } from '../core/types.js'
import type { Decision } from '../decision.js'
import type { DecisionSource, LimiterEvent } from '../events.js'
import type { LimiterConfig, RuleConfig } from '../options.js'

/**
 * One rule as a store sees it: its name and policy are plain data, which is what crosses into
 * Lua or a Durable Object; in-process stores run `compiled`, the policy's core from its factory.
 */
export interface StoreRule {
  readonly name: string
  readonly policy: Policy
  readonly compiled: CompiledRule
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
  /**
   * Set by a limiter, never by a store, on a rule whose state it does not know (not asked: a
   * cheaper consistency group denied first; or failing open while the store is unavailable): the
   * rule's part is built as a shadow rule's — it takes no part in the decision — and its numbers
   * are placeholders.
   */
  readonly unknown?: true
}

/** Per-call options of `evaluate`: plain data, so they cross into Lua or a Durable Object. */
export interface EvaluateOptions {
  /**
   * Rules in shadow for this call (bit i = rule i): their denials do not block the request; a
   * shadow rule is charged only when it admits, so it counts exactly as if it were enforced.
   */
  readonly shadow?: number
  /**
   * Charge every enforced rule whatever it decides: syncing counts that were already admitted
   * elsewhere (approximate consistency). A shadow rule is still charged only when it admits (the
   * whole cost), so it never counts what it would have denied. The verdicts still report what the
   * rules decided.
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
  /**
   * Forgets every rule's state for `key`. `waitMs`: the limiter's deadline, which a store that
   * lets calls in flight finish before a reset waits for no longer (their callers have been
   * answered by then).
   */
  reset(key: string, waitMs?: number): Promise<void>
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
  /**
   * How a limiter decides on this store when its bound rules have no `evaluateSync`: remote
   * stores (Redis, Durable Objects) set it to `remoteDecider`, the path with the deadline,
   * circuit breaker, denial cache, approximate sync and per-rule `onStoreError` fallback. It lives
   * with the store so that an app on the in-process memory store does not bundle any of it.
   * A custom remote store sets `decider: remoteDecider` (from `edgelimit`).
   */
  readonly decider?: Decider
}

/** What a limiter hands a store's decider: its rules, settings and decision helpers. */
export interface DecisionContext {
  readonly rules: readonly RuleConfig[]
  readonly config: LimiterConfig
  readonly store: Store
  /** `store.bind(rules)`, already made. */
  readonly bound: BoundRules
  readonly clock: Clock
  /** Builds a decision from verdicts in rule order; `shadow` bit i = rule i only observes. */
  build(verdicts: readonly RuleVerdict[], shadow: number): Decision
  /** The shadow mask for `key` (shadow rules and keys outside a rule's `enforce` share). */
  shadowOf(key: string): number
  /** Reports an event to the limiter's observers (undefined when there are none). */
  readonly emit: ((event: LimiterEvent) => void) | undefined
  /**
   * Reports one decision to the limiter's observers and returns `decision` unchanged: a `decision`
   * event (`key`, `cost`, `decision`, `source`), then a `shadow-deny` event per shadow rule that
   * denied; nothing when there are no observers. Call it once per `decide`, with the `key` and
   * `cost` that `decide` got — the units asked for, 0 for a peek, which `meterSink` does not count
   * — and how the decision was reached (`store`, `cache`, `local`, `approximate`, `fallback`).
   * `cost` comes second: a decider written for `report(key, decision, source)` must add it.
   *
   * @example return report(key, cost, build(verdicts, shadowOf(key)), 'store')
   */
  report(key: string, cost: number, decision: Decision, source: DecisionSource): Decision
}

/** A limiter's decisions on one store: what `limit`, `reset` and `flush` call. */
export interface DecisionPath {
  decide(key: string, cost: number): Promise<Decision>
  reset(key: string): Promise<unknown>
  flush(): Promise<void>
}

/** Makes a limiter's decision path for a store (see `Store.decider`). */
export type Decider = (context: DecisionContext) => DecisionPath
