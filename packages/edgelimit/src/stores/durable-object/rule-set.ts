import { type CompiledRule, type LogState, newVerdict, plainVerdict, type Verdict } from '../../core/index.js'
import type { Policy } from '../../core/types.js'
import { EdgelimitError } from '../../errors.js'
import type { RuleVerdict } from '../types.js'
import type { RuleSpec } from './protocol.js'

/** One rule's state for one key: a numeric row, or a sliding log. `undefined` is a fresh key. */
export type RuleState = number[] | LogState

/** A rule set compiled inside the object. */
export interface RuleSet {
  readonly names: readonly string[]
  readonly rules: readonly CompiledRule[]
  /**
   * Decides one request for one key from `states` (one per rule, `undefined` = fresh), all or
   * nothing, exactly as the memory store does: the request is charged to every rule only if every
   * enforced rule admits it (a shadow rule is charged only when it admits; `force` charges every
   * enforced rule). Sets `writes[i]` to the new state of each charged rule, and leaves the others
   * (pass a fresh array).
   */
  evaluate(
    states: readonly (RuleState | undefined)[],
    cost: number,
    now: number,
    shadow: number,
    force: boolean,
    writes: RuleState[],
  ): RuleVerdict[]
}

/** The algorithms an object runs: name → compiler (see `durableObjectClass`). */
export type Compilers = ReadonlyMap<string, (policy: Policy) => CompiledRule>

/** Compiles a rule set from its wire form (`encodeRules`) with the object's algorithms. */
export function compileRuleSet(spec: RuleSpec, compilers: Compilers): RuleSet {
  const names = spec.map(([name]) => name)
  const rules = spec.map(([, policy]) => {
    const compile = compilers.get(policy.algorithm)
    if (compile === undefined) {
      throw new EdgelimitError(
        'ERR_EDGELIMIT_STORE',
        `This class runs no ${policy.algorithm} rules: list its factory in durableObjectClass()`,
      )
    }
    return compile(policy)
  })
  const outs: Verdict[] = rules.map(() => newVerdict())

  function decide(r: number, state: RuleState | undefined, now: number, cost: number): Verdict {
    const rule = rules[r] as CompiledRule
    const out = outs[r] as Verdict
    if (rule.kind === 'log') rule.decide(state as LogState | undefined, now, cost, out)
    // A fresh key's row: all zeros (made here, at the cost of a small array per fresh rule).
    else
      rule.decide((state as number[] | undefined) ?? new Array<number>(rule.width).fill(0), 0, now, cost, out)
    return out
  }

  return {
    names,
    rules,
    evaluate(states, cost, now, shadow, force, writes) {
      let allowed = true
      for (let r = 0; r < rules.length; r++) {
        if (!decide(r, states[r], now, cost).allowed && (shadow & (1 << r)) === 0) allowed = false
      }
      if (cost > 0 && !allowed && !force) {
        // Nothing is charged: admitting rules report their state as it stands.
        for (let r = 0; r < rules.length; r++) if ((outs[r] as Verdict).allowed) decide(r, states[r], now, 0)
      } else if (cost > 0) {
        for (let r = 0; r < rules.length; r++) {
          const rule = rules[r] as CompiledRule
          const out = outs[r] as Verdict
          // Every enforced rule admitted, or the charge is forced: a shadow rule that denies is not charged.
          if (!out.allowed && (shadow & (1 << r)) !== 0) continue
          writes[r] =
            rule.kind === 'log'
              ? rule.commit(states[r] as LogState | undefined, now, cost)
              : out.next.slice(0, rule.width)
        }
      }
      return outs.map(plainVerdict)
    },
  }
}

/** A state as stored: a row as is, a log as its live times and per-entry costs. */
export function serializeState(state: RuleState): string {
  if (Array.isArray(state)) return JSON.stringify(state)
  const { times, sums, head } = state
  return JSON.stringify({
    times: times.slice(head),
    costs: sums.slice(head).map((sum, i) => sum - (sums[head + i - 1] ?? 0)),
  })
}

/** The inverse of `serializeState`. */
export function parseState(text: string): RuleState {
  const value = JSON.parse(text) as number[] | { times: number[]; costs: number[] }
  if (Array.isArray(value)) return value
  let total = 0
  const sums = value.costs.map((c) => (total += c))
  return { times: value.times, sums, head: 0 }
}
