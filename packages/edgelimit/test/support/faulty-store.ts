import { remoteDecider } from '../../src/resilience/remote.js'
import type { BoundRules, Store } from '../../src/stores/types.js'

/** How the wrapped store misbehaves right now; change it between calls. */
export interface Faults {
  /** Every call rejects with this error. */
  fail?: Error | undefined
  /** Every call hangs until `release()` (a frozen store). */
  hang?: boolean
  /** Calls that reached the store. */
  calls: number
}

/**
 * A remote store over `inner`: decided under the deadline, breaker and failure policy, each of its
 * bound rules `wrap`'s calls around `inner`'s (an async boundary to answer late or fail behind).
 *
 * @example
 * const down = remoteOver(memoryStore(), 'down', (bound) => ({
 *   evaluate: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')),
 *   reset: (key) => bound.reset(key),
 * }))
 */
export function remoteOver(inner: Store, name: string, wrap: (bound: BoundRules) => BoundRules): Store {
  return { name, decider: remoteDecider, bind: (rules) => wrap(inner.bind(rules)) }
}

/**
 * A store wrapper for in-process resilience tests: the real memory store behind an async
 * boundary, failing or hanging on demand. (Tests against real Redis live in test/resilience.)
 */
export function faultyStore(inner: Store): { store: Store; faults: Faults; release(): void } {
  const faults: Faults = { calls: 0 }
  let waiting: (() => void)[] = []
  const store = remoteOver(inner, 'faulty', (bound) => ({
    async evaluate(key, cost, now, options) {
      faults.calls++
      if (faults.hang) await new Promise<void>((resolve) => waiting.push(resolve))
      if (faults.fail) throw faults.fail
      return bound.evaluate(key, cost, now, options)
    },
    reset: (key) => bound.reset(key),
  }))
  return {
    store,
    faults,
    release() {
      const all = waiting
      waiting = []
      for (const resolve of all) resolve()
    },
  }
}
