/**
 * Recent denials, answered in-process until they expire: a key denied with `retryAfterMs = d` for
 * a cost `c` is denied again for the same cost until `d` has passed — as the store would answer,
 * since admission only becomes possible as time passes (other clients can only push it further
 * out). Bounded, least recently used first.
 */
export interface DenyCache {
  /** The instant until which `key` is denied for `cost`, if cached. */
  until(key: string, cost: number, now: number): number | undefined
  set(key: string, cost: number, until: number): void
  delete(key: string): void
  readonly size: number
}

/**
 * Creates a denial cache holding at most `maxKeys` keys.
 * @example const cache = createDenyCache(10_000)
 */
export function createDenyCache(maxKeys: number): DenyCache {
  const entries = new Map<string, { until: number; cost: number }>()
  return {
    until(key, cost, now) {
      const e = entries.get(key)
      if (e === undefined) return undefined
      if (e.until <= now) {
        entries.delete(key)
        return undefined
      }
      return cost === e.cost ? e.until : undefined
    },
    set(key, cost, until) {
      entries.delete(key)
      if (entries.size >= maxKeys) entries.delete(entries.keys().next().value as string)
      entries.set(key, { until, cost })
    },
    delete(key) {
      entries.delete(key)
    },
    get size() {
      return entries.size
    },
  }
}
