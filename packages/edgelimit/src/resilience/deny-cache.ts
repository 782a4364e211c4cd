import type { Decision } from '../decision.js'

/**
 * A denial the store would repeat, waits aside, until `until`: for `cost`, made at `at`. The
 * remote path keeps them per key in a `Map` bounded with `remember` (least recently used first).
 */
export interface Denial {
  readonly at: number
  readonly until: number
  readonly cost: number
  readonly decision: Decision
}

/**
 * `key`'s cached denial of `cost` as it stands at `now` (see `aged`), if there is one: not over,
 * and not made after `now` (a clock that stepped back asks the store). A hit is a use: it moves to
 * the newest end.
 * @example const denied = cachedDenial(cache, 'ip:1.2.3.4', 1, clock.now())
 */
export function cachedDenial(
  cache: Map<string, Denial>,
  key: string,
  cost: number,
  now: number,
): Decision | undefined {
  const e = cache.get(key)
  if (e === undefined) return undefined
  cache.delete(key)
  if (e.until <= now) return undefined
  cache.set(key, e)
  return cost === e.cost && e.at <= now ? aged(e.decision, now - e.at) : undefined
}

/**
 * A cached denial as it stands `ms` later, before the first rule's retry time: every rule still
 * denies, its waits shortened by the time passed (a wait of `Infinity` stays).
 */
function aged(decision: Decision, ms: number): Decision {
  const age = <T extends { retryAfterMs: number; resetAfterMs: number }>(r: T): T => ({
    ...r,
    retryAfterMs: r.retryAfterMs - ms,
    resetAfterMs: Math.max(0, r.resetAfterMs - ms),
  })
  return { ...age(decision), rules: decision.rules.map(age) }
}
