/**
 * Sets `key` in `map`, which keeps at most `max` entries: the oldest are dropped first. The bound
 * of the small caches (addresses, partition keys, HMAC keys, denials, compiled rule sets).
 * @internal
 * @example remember(cache, key, value, 1024)
 */
export function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  // When full, the oldest quarter goes in one pass: an iterator walks the holes that deletions
  // leave at the front until the Map rehashes, so one entry per new key would cost O(holes) each.
  if (map.size >= max) {
    let n = max >> 2 || 1
    for (const old of map.keys()) {
      map.delete(old)
      if (--n < 1) break
    }
  }
  map.set(key, value)
}
