/**
 * A direct-mapped cache of strings by their bytes. Log lines repeat the same few thousand IPs
 * and paths: returning the same string object for the same bytes spares an allocation per line
 * and lets every `Map` reuse the string's cached hash. Bounded: `size` strings at most.
 *
 * With `counting`, it also counts how often each string was asked for, in the slot it already
 * holds (no map lookup per line): `counts()` folds the slots into exact totals.
 */
export interface Interner {
  /** The string of the ASCII bytes `buf[s, e)` (other bytes are decoded as UTF-8, and counted apart). */
  get(buf: Buffer, s: number, e: number): string
  /** How many times each string was asked for (only with `counting`). */
  counts(): Map<string, number>
}

/** Creates an interner of `size` slots (a power of two). */
export function interner(size = 1 << 16, maxLength = 128, counting = false): Interner {
  const mask = size - 1
  // No stored hashes: comparing the held string touches memory the lookup needs anyway.
  const strings: (string | undefined)[] = new Array(size)
  const hits = counting ? new Float64Array(size) : undefined
  // Totals of strings that left their slot (or never had one).
  const folded = new Map<string, number>()
  const fold = (s: string, n: number) => folded.set(s, (folded.get(s) ?? 0) + n)
  const uncached = (buf: Buffer, s: number, e: number) => {
    const str = buf.toString('utf8', s, e)
    if (hits !== undefined) fold(str, 1)
    return str
  }
  return {
    get(buf, s, e) {
      const n = e - s
      if (n > maxLength) return uncached(buf, s, e)
      let h = 0x811c9dc5 | 0
      for (let i = s; i < e; i++) {
        const c = buf[i] as number
        if (c >= 0x80) return uncached(buf, s, e)
        h = Math.imul(h ^ c, 0x01000193)
      }
      const slot = (h ^ (h >>> 16)) & mask
      const hit = strings[slot]
      if (hit !== undefined && hit.length === n) {
        let same = true
        for (let i = 0; i < n; i++) {
          if (hit.charCodeAt(i) !== buf[s + i]) {
            same = false
            break
          }
        }
        if (same) {
          if (hits !== undefined) hits[slot] = (hits[slot] as number) + 1
          return hit
        }
      }
      const str = buf.toString('latin1', s, e)
      if (hits !== undefined) {
        if (hit !== undefined) fold(hit, hits[slot] as number)
        hits[slot] = 1
      }
      strings[slot] = str
      return str
    },
    counts() {
      const out = new Map(folded)
      if (hits !== undefined) {
        for (let i = 0; i < size; i++) {
          const str = strings[i]
          if (str !== undefined) out.set(str, (out.get(str) ?? 0) + (hits[i] as number))
        }
      }
      return out
    },
  }
}
