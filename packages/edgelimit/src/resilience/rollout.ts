/**
 * Whether `key` falls inside the first `percent` % of keys for `rule`: a stable hash (FNV-1a,
 * 32-bit) of rule and key into 10,000 buckets, so a client is either always or never enforced at
 * a given percentage, and raising the percentage only adds clients.
 *
 * @example enforcedFor('login', 'client-42', 25) // the same answer on every call and every node
 */
export function enforcedFor(rule: string, key: string, percent: number): boolean {
  if (percent >= 100) return true
  // At 0 % no key is enforced (no bucket is below 0): answered without hashing the key, as a
  // rollout starts there and every request of the rule asks.
  if (percent <= 0) return false
  let h = 0x811c9dc5
  const text = `${rule}\u0000${key}`
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) % 10_000 < percent * 100
}
