import { remember } from '../remember.js'

/**
 * Recent denials, answered in-process until they expire: a key denied with `retryAfterMs = d` for
 * a cost `c` is denied again for the same cost until `d` has passed — as the store would answer,
 * since admission only becomes possible as time passes (other clients can only push it further
 * out). Bounded, least recently used first.
 */
export interface DenyCache<T> {
  /** What was cached with `key`'s denial for `cost`, while the denial lasts. */
  get(key: string, cost: number, now: number): T | undefined
  set(key: string, cost: number, until: number, value: T): void
  delete(key: string): void
}

/**
 * Creates a denial cache holding at most `maxKeys` keys.
 * @example const cache = createDenyCache<Decision>(10_000)
 */
export function createDenyCache<T>(maxKeys: number): DenyCache<T> {
  const entries = new Map<string, { until: number; cost: number; value: T }>()
  return {
    get(key, cost, now) {
      const e = entries.get(key)
      if (e === undefined) return undefined
      // Taken out, and put back at the newest end while it lasts: a hit is a use.
      entries.delete(key)
      if (e.until <= now) return undefined
      entries.set(key, e)
      return cost === e.cost ? e.value : undefined
    },
    set(key, cost, until, value) {
      entries.delete(key)
      remember(entries, key, { until, cost, value }, maxKeys)
    },
    delete(key) {
      entries.delete(key)
    },
  }
}
