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
 * A store wrapper for in-process resilience tests: the real memory store behind an async
 * boundary, failing or hanging on demand. (Tests against real Redis live in test/resilience.)
 */
export function faultyStore(inner: Store): { store: Store; faults: Faults; release(): void } {
  const faults: Faults = { calls: 0 }
  let waiting: (() => void)[] = []
  const store: Store = {
    name: 'faulty',
    // A remote store: decided under the deadline, breaker and failure policy.
    decider: remoteDecider,
    bind(rules) {
      const bound = inner.bind(rules)
      const wrapped: BoundRules = {
        async evaluate(key, cost, now, options) {
          faults.calls++
          if (faults.hang) await new Promise<void>((resolve) => waiting.push(resolve))
          if (faults.fail) throw faults.fail
          return bound.evaluate(key, cost, now, options)
        },
        reset: (key) => bound.reset(key),
      }
      return wrapped
    },
  }
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
