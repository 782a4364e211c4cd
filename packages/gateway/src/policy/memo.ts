/** A cache of values by string key, bounded in bytes as well as entries (see `memo`). */
export interface Memo<V> {
  /** The value held for `key`, if any. */
  get(key: string): V | undefined
  /** Holds `value` for `key`, unless the key is longer than `MAX_KEY`. */
  set(key: string, value: V): void
  /** How many entries are held. */
  readonly size: number
}

/** The longest key a memo holds: an address, or a descriptor of a usual API key, fits. */
export const MAX_KEY = 256

/**
 * A cache of at most `entries` values (emptied when full) whose keys are at most `MAX_KEY`
 * characters. Keys often come from clients (a 16 KB API key or X-Forwarded-For): a longer key is
 * worked out again on every use and never held, so a flood of distinct keys costs recomputation,
 * and the memory held stays under `entries × MAX_KEY` characters plus the (short) values.
 *
 * @example const hashes = memo<string>(); hashes.set('ip=203.0.113.9', hash)
 */
export function memo<V>(entries = 50_000): Memo<V> {
  const map = new Map<string, V>()
  return {
    get: (key) => (key.length > MAX_KEY ? undefined : map.get(key)),
    set(key, value) {
      if (key.length > MAX_KEY) return
      if (map.size >= entries) map.clear()
      map.set(key, value)
    },
    get size() {
      return map.size
    },
  }
}
