// Replays a recorded trace through any store: used in Node (memory store) and inside workerd
// (Durable Object store), so both sides run the same code and only the store differs.
import type { AlgorithmSpec } from '../../../src/algorithms.js'
import { algorithmSpec, createLimiter, type Decision, type Rule, type Store } from '../../../src/index.js'
import { manualClock } from '../../../src/testing/index.js'

/** A trace: limiters by name, and events `[limiter, key, cost, at]` in time order. */
export interface Trace {
  limiters: Record<string, { name: string; algorithm: AlgorithmSpec; mode?: 'shadow' }[]>
  events: [limiter: string, key: string, cost: number, at: number][]
}

/** A decision in every field stores must agree on, per rule too (as JSON: Infinity is null). */
export function summary(d: Decision) {
  return {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetAfterMs: d.resetAfterMs,
    retryAfterMs: d.retryAfterMs,
    delayMs: d.delayMs,
    reason: d.reason,
    rules: d.rules.map((r) => [
      r.name,
      r.allowed,
      r.remaining,
      r.resetAfterMs,
      r.retryAfterMs,
      r.delayMs ?? 0,
      r.reason,
    ]),
  }
}

export type Decisions = Record<string, ReturnType<typeof summary>[]>

/** The store alone decides: no deadline, breaker or denial cache in between. */
const PURE = { timeout: false, breaker: false, denyCache: false } as const

/** Every limiter of the trace over its own events, at the recorded times; limiters run in parallel. */
export async function replay(trace: Trace, store: () => Store): Promise<Decisions> {
  const out: Decisions = {}
  await Promise.all(
    Object.entries(trace.limiters).map(async ([name, rules]) => {
      const clock = manualClock(0)
      // The trace is JSON: its plain specs become the factories' through algorithmSpec().
      const specs: Rule[] = rules.map((r) => ({ ...r, algorithm: algorithmSpec(r.algorithm) }))
      const limiter = createLimiter({ rules: specs, store: store(), clock, ...PURE })
      const decisions: ReturnType<typeof summary>[] = []
      for (const [which, key, cost, at] of trace.events) {
        if (which !== name) continue
        clock.set(at)
        decisions.push(summary(await limiter.limit(key, { cost })))
      }
      out[name] = decisions
    }),
  )
  return JSON.parse(JSON.stringify(out))
}
