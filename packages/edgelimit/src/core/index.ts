import { compileFixedWindow } from './fixed-window.js'
import { compileGcra } from './gcra.js'
import { compileLeakyBucket } from './leaky-bucket.js'
import { compileSlidingLog, type LogRule, type LogState } from './sliding-log.js'
import { compileSlidingWindow } from './sliding-window.js'
import { compileTokenBucket } from './token-bucket.js'
import { type NumericRule, newVerdict, type Policy, type Verdict } from './types.js'

export type { LogRule, LogState } from './sliding-log.js'
export * from './types.js'

/** A policy compiled for evaluation. */
export type CompiledRule = NumericRule | LogRule

/** Compiles a validated policy into its hot-path form. */
export function compile(policy: Policy): CompiledRule {
  switch (policy.algorithm) {
    case 'fixed-window':
      return compileFixedWindow(policy)
    case 'sliding-log':
      return compileSlidingLog(policy)
    case 'sliding-window':
      return compileSlidingWindow(policy)
    case 'token-bucket':
      return compileTokenBucket(policy)
    case 'leaky-bucket':
      return compileLeakyBucket(policy)
    case 'gcra':
      return compileGcra(policy)
  }
}

/** A rule's state in plain data: a numeric row, or a log's times and costs. */
export type PlainState = number[] | { times: number[]; costs: number[] }

/** The outcome of one pure step. */
export interface Step {
  readonly verdict: Omit<Verdict, 'next'>
  /** The state after the step (unchanged on denial and for a peek, cost 0). */
  readonly state: PlainState
}

/**
 * One pure decision, `(policy, state, now, cost) → (verdict, state)`, with state as plain data.
 * The hot paths (stores) use `compile()` directly; this is the reference shape for tests, other
 * runtimes and anyone embedding the core.
 *
 * @example
 * let s = step(policy, undefined, 0, 1).state
 * s = step(policy, s, 1000, 1).state
 */
export function step(policy: Policy, state: PlainState | undefined, now: number, cost: number): Step {
  const rule = compile(policy)
  const out = newVerdict()
  if (rule.kind === 'numeric') {
    const row = Array.isArray(state) ? state.slice() : new Array<number>(rule.width).fill(0)
    rule.decide(row, 0, now, cost, out)
    const { next, ...verdict } = out
    return { verdict, state: out.allowed && cost > 0 ? next.slice(0, rule.width) : row }
  }
  const log = toLog(state)
  rule.decide(log, now, cost, out)
  const { next: _next, ...verdict } = out
  return { verdict, state: fromLog(out.allowed && cost > 0 ? rule.commit(log, now, cost) : log) }
}

function toLog(state: PlainState | undefined): LogState {
  const times = state !== undefined && !Array.isArray(state) ? state.times.slice() : []
  const costs = state !== undefined && !Array.isArray(state) ? state.costs : []
  let total = 0
  const sums = costs.map((c) => {
    total += c
    return total
  })
  return { times, sums, head: 0 }
}

function fromLog(log: LogState): PlainState {
  const times = log.times.slice(log.head)
  const costs = times.map((_, i) => {
    const j = i + log.head
    return (log.sums[j] as number) - (j === 0 ? 0 : (log.sums[j - 1] as number))
  })
  return { times, costs }
}
