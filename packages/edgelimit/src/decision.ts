import type { DenyReason } from './core/types.js'
import type { RuleConfig } from './options.js'
import type { RuleVerdict } from './stores/types.js'

/** Why a request was denied: by a rule, or because the store was unavailable under fail-closed. */
export type DecisionReason = DenyReason | 'store-unavailable'

/** One rule's part of a decision. */
export interface RuleDecision {
  readonly name: string
  /** Whether this rule admits the request (it is charged only if every enforced rule admits it). */
  readonly allowed: boolean
  /**
   * True when the rule only observes this request (shadow mode, or outside its `enforce` share), or
   * takes no part in it because its state is not known here (`unknown`).
   */
  readonly shadow: boolean
  /**
   * Set on an enforced rule whose state is not known here: a rule not asked in a limiter mixing
   * consistency modes, or one failing open (docs/resilience.md). Its numbers are placeholders
   * (admits, 0 left); it is `shadow` too, except as the one rule of a limiter. Its policy is still
   * advertised, without a `RateLimit` member.
   */
  readonly unknown?: true
  readonly limit: number
  /** Further cost-1 requests this rule would admit right now. */
  readonly remaining: number
  /** Until this rule's state is back to fresh, assuming no further requests. */
  readonly resetAfterMs: number
  /** The smallest wait after which the same request would pass this rule (0 when allowed). */
  readonly retryAfterMs: number
  /** How long to hold an admitted request (shaping leaky bucket only, else undefined). */
  readonly delayMs: number | undefined
  /** Why the rule denied (undefined when it admits). */
  readonly reason: DecisionReason | undefined
}

/** The answer for one request. A denial is a decision, never an error. */
export interface Decision extends Omit<RuleDecision, 'name' | 'shadow' | 'unknown'> {
  /** Every rule's part, in rule order. */
  readonly rules: readonly RuleDecision[]
}

/**
 * The index of the rule that binds a decision, among enforced rules when there are any (else the
 * first failing open, else the first): when
 * admitted, the one closest to exhaustion; when denied, the one that keeps the request out longest
 * (it passes once every rule admits it, and each rule's admission only grows with time).
 */
export function bindingRule(parts: readonly RuleDecision[], allowed: boolean): number {
  // Until an enforced rule that knows its state: a rule failing open (enforced, its state unknown,
  // `shadow` in a decision of several) before one in shadow.
  let bind = parts.findIndex((p) => p.unknown)
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i] as RuleDecision
    if (p.shadow) continue
    const b = parts[bind] as RuleDecision | undefined
    if (
      b?.shadow !== false ||
      (allowed ? p.remaining < b.remaining : !p.allowed && (b.allowed || p.retryAfterMs > b.retryAfterMs))
    ) {
      bind = i
    }
  }
  return Math.max(0, bind)
}

/** Builds decisions from store verdicts (in rule order) for a fixed list of rules. */
export interface DecisionBuilder {
  /** `shadow`: bit i set = rule i only observes this request. */
  (verdicts: readonly RuleVerdict[], shadow: number): Decision
  /**
   * For a limiter of one rule, with no rule in shadow: the same decision, built without the
   * multi-rule bookkeeping (undefined for several rules).
   */
  readonly one: ((verdicts: readonly RuleVerdict[]) => Decision) | undefined
}

/** Builds decisions from store verdicts for a fixed list of rules. */
export function decisionBuilder(rules: readonly RuleConfig[]): DecisionBuilder {
  const count = rules.length
  const names = rules.map((r) => r.name)
  const limits = rules.map((r) => r.compiled.limit)
  const shaping = rules.map((r) => r.policy.algorithm === 'leaky-bucket' && r.policy.mode === 'shape')
  const anyShaping = shaping.includes(true)

  /** `observes`: the rule only observes this request (its `unknown` is then no concern). */
  function part(i: number, v: RuleVerdict, observes?: number): RuleDecision {
    return {
      name: names[i] as string,
      allowed: v.allowed,
      shadow: !!(observes || (v.unknown && count > 1)),
      unknown: observes ? undefined : v.unknown,
      limit: limits[i] as number,
      remaining: v.remaining,
      resetAfterMs: v.resetAfterMs,
      retryAfterMs: v.retryAfterMs,
      delayMs: shaping[i] && v.allowed ? v.delayMs : undefined,
      reason: v.reason,
    }
  }

  /**
   * The decision bound by `bind` (`delay`: the longest shaping delay of the enforced rules). For
   * one rule, its part's own fields: an admitting part waits 0 and has no reason.
   */
  function decision(
    allowed: boolean,
    bind: RuleDecision,
    delay: number | undefined,
    rules: RuleDecision[],
  ): Decision {
    return {
      allowed,
      limit: bind.limit,
      remaining: allowed && !bind.allowed ? 0 : bind.remaining,
      resetAfterMs: bind.resetAfterMs,
      retryAfterMs: allowed ? 0 : bind.retryAfterMs,
      delayMs: allowed && anyShaping ? delay : undefined,
      reason: allowed ? undefined : bind.reason,
      rules,
    }
  }

  /** One rule: the decision is its part's fields, and the part. */
  function one(verdicts: readonly RuleVerdict[]): Decision {
    const p = part(0, verdicts[0] as RuleVerdict)
    return decision(p.allowed, p, p.delayMs, [p])
  }

  function build(verdicts: readonly RuleVerdict[], shadow: number): Decision {
    if (shadow === 0 && count === 1) return one(verdicts)
    let allowed = true
    let delay = 0
    const parts: RuleDecision[] = []
    for (let i = 0; i < verdicts.length; i++) {
      const p = part(i, verdicts[i] as RuleVerdict, shadow & (1 << i))
      if (!p.shadow) {
        if (!p.allowed) allowed = false
        // (`undefined > delay` is false.)
        if ((p.delayMs as number) > delay) delay = p.delayMs as number
      }
      parts.push(p)
    }
    return decision(allowed, parts[bindingRule(parts, allowed)] as RuleDecision, delay, parts)
  }
  build.one = count === 1 ? one : undefined
  return build
}
