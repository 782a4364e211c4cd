import { gcd } from '../../core/math.js'
import type { Policy } from '../../core/types.js'
import fixedWindowLua from './scripts/fixed-window.lua'
import libLua from './scripts/lib.lua'
import mainLua from './scripts/main.lua'
import meterLua from './scripts/meter.lua'
import slidingLogLua from './scripts/sliding-log.lua'
import slidingWindowLua from './scripts/sliding-window.lua'
import tatLua from './scripts/tat.lua'

/** How one rule runs in Lua: its file, function, optional commit and numeric params. */
interface LuaRule {
  readonly file: string
  readonly decide: string
  readonly commit?: string
  readonly params: readonly number[]
}

function luaRule(policy: Policy): LuaRule {
  switch (policy.algorithm) {
    case 'fixed-window':
      return { file: fixedWindowLua, decide: 'fixed_window', params: [policy.limit, policy.windowMs] }
    case 'sliding-window':
      return { file: slidingWindowLua, decide: 'sliding_window', params: [policy.limit, policy.windowMs] }
    case 'sliding-log':
      return {
        file: slidingLogLua,
        decide: 'sliding_log',
        commit: 'sliding_log_commit',
        params: [policy.limit, policy.windowMs],
      }
    case 'token-bucket':
      return meterRule(policy.capacity, policy.refillRate, policy.refillIntervalMs)
    case 'leaky-bucket':
      return policy.mode === 'police'
        ? meterRule(policy.capacity, policy.leakRate, policy.leakIntervalMs)
        : tatRule(policy.leakRate, policy.leakIntervalMs, policy.capacity + 1, 1)
    case 'gcra':
      return tatRule(policy.limit, policy.periodMs, policy.burst, 0)
  }
}

/** The exact fixed-point scale, as the core derives it (core/bucket.ts). */
function meterRule(capacity: number, rate: number, intervalMs: number): LuaRule {
  const g = gcd(rate, intervalMs)
  return { file: meterLua, decide: 'meter', params: [capacity, intervalMs / g, rate / g] }
}

/** Steps of 1/k ms that make T exact, as the core derives them (core/tat.ts). */
function tatRule(count: number, intervalMs: number, slots: number, shape: number): LuaRule {
  const g = gcd(count, intervalMs)
  return { file: tatLua, decide: 'tat', params: [count / g, intervalMs / g, slots, shape] }
}

/** A limiter's rules compiled to one script and its constant arguments. */
export interface CompiledScript {
  /** The whole script: library, the algorithms used, the rule table and main. */
  readonly text: string
  /** ARGV after `now`, `cost`, the shadow flags and `force`: every rule's params in order. */
  readonly params: readonly string[]
}

/**
 * Builds the single script that evaluates all of a limiter's rules atomically. Scripts differ
 * only by which algorithms they include, so limiters with the same algorithms share a script.
 */
export function compileScript(policies: readonly Policy[]): CompiledScript {
  const rules = policies.map(luaRule)
  const files = [...new Set(rules.map((r) => r.file))]
  const table = rules
    .map((r) => `{ decide = ${r.decide}, n = ${r.params.length}${r.commit ? `, commit = ${r.commit}` : ''} }`)
    .join(',\n  ')
  return {
    text: [libLua, ...files, `local RULES = {\n  ${table},\n}`, mainLua].join('\n'),
    params: rules.flatMap((r) => r.params.map(String)),
  }
}
