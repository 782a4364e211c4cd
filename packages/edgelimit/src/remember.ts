/**
 * Sets `key` in `map`, which keeps at most `max` entries: the oldest is dropped first. The bound
 * of the small caches (addresses, partition keys, HMAC keys, denials, compiled rule sets).
 * @internal
 * @example remember(cache, key, value, 1024)
 */
export function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  if (map.size >= max) map.delete(map.keys().next().value as string)
  map.set(key, value)
}
