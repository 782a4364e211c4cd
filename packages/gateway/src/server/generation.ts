import type { Limiter } from 'edgelimit'
import type { Logger } from 'pino'
import { type CompiledPolicy, labelsGone } from '../policy/compile.js'
import type { StoreHandle } from '../policy/store.js'
import type { Upstream } from '../proxy/forward.js'
import { flushAll, ruleNames } from './flush.js'
import type { Metrics } from './metrics.js'

/** One policy in force: the compiled rules, the upstream, and the requests that use them. */
export interface Generation {
  readonly id: number
  readonly policy: CompiledPolicy
  readonly upstream: Upstream
  readonly text: string
  inFlight: number
  retired: boolean
}

/** The resources generations share, and what retired ones leave behind. */
export interface Generations {
  /** Resources shared by generations, with how many use each. */
  readonly users: Map<StoreHandle | Upstream, number>
  /** Limiters of retired generations whose counts are being flushed. */
  readonly retiring: Set<Limiter>
  /** Resources no generation uses, waiting for their limiters' flush before they close. */
  readonly unused: Set<StoreHandle | Upstream>
  /** Stores a reload opened and waits on. */
  readonly opening: Set<StoreHandle>
  /** Puts a drained, retired generation away, `current` being the generation in force. */
  release(gen: Generation, current: Generation): void
}

/**
 * Tracks what generations share, from the first one on.
 *
 * @example const generations = trackGenerations(first, metrics, log)
 */
export function trackGenerations(first: Generation, metrics: Metrics, log: Logger): Generations {
  // Resources shared by generations are closed when the last generation using them is drained.
  const users = new Map<StoreHandle | Upstream, number>([
    [first.policy.store, 1],
    [first.upstream, 1],
  ])

  // What retired generations leave behind while their counts are flushed: shutdown flushes and
  // closes them too.
  const retiring = new Set<Limiter>()
  const unused = new Set<StoreHandle | Upstream>()
  // A store a reload opened and waits on: shutdown closes it, which ends the wait.
  const opening = new Set<StoreHandle>()

  /**
   * Puts a drained, retired generation away: its limiters that the policy in force (`current`) does
   * not keep flush their approximate counts, and only then are the resources no generation uses any
   * more closed (a flush needs its store's connection).
   */
  function release(gen: Generation, current: Generation): void {
    const idle: (StoreHandle | Upstream)[] = []
    for (const resource of [gen.policy.store, gen.upstream]) {
      const n = (users.get(resource) ?? 1) - 1
      if (n > 0) users.set(resource, n)
      else {
        users.delete(resource)
        unused.add(resource)
        idle.push(resource)
      }
    }
    const retired = [...gen.policy.limiters]
      .filter(([signature, limiter]) => current.policy.limiters.get(signature) !== limiter)
      .map(([, limiter]) => limiter)
    for (const limiter of retired) retiring.add(limiter)
    for (const [rule, tier] of labelsGone(gen.policy, retired, current.policy))
      metrics.forgetBreaker(rule, tier)
    void flushAll(retired).then(async (result) => {
      for (const limiter of retired) retiring.delete(limiter)
      if (result.unsent.length > 0) {
        log.warn(
          { generation: gen.id, rules: ruleNames(result.unsent), err: result.error },
          'approximate counts of a retired policy not flushed',
        )
      }
      for (const resource of idle) {
        if (!unused.delete(resource)) continue // closed by shutdown meanwhile
        await resource
          .close()
          .catch((error: Error) => log.warn({ err: error.message }, 'closing a retired resource failed'))
      }
    })
  }

  return { users, retiring, unused, opening, release }
}
