/**
 * A direct-mapped cache of strings by their bytes. Log lines repeat the same few thousand paths:
 * returning the same string object for the same bytes spares an allocation per line and lets
 * every `Map` reuse the string's cached hash. Bounded: `size` strings at most.
 */
export interface Interner {
  /** The string of the ASCII bytes `buf[s, e)` (other bytes are decoded as UTF-8, and not cached). */
  get(buf: Buffer, s: number, e: number): string
}

/** Creates an interner of `size` slots (a power of two). */
export function interner(size = 1 << 16, maxLength = 128): Interner {
  const mask = size - 1
  // No stored hashes: comparing the held string touches memory the lookup needs anyway.
  const strings: (string | undefined)[] = new Array(size)
  return {
    get(buf, s, e) {
      const n = e - s
      if (n > maxLength) return buf.toString('utf8', s, e)
      let h = 0x811c9dc5 | 0
      for (let i = s; i < e; i++) {
        const c = buf[i] as number
        if (c >= 0x80) return buf.toString('utf8', s, e)
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
        if (same) return hit
      }
      const str = buf.toString('latin1', s, e)
      strings[slot] = str
      return str
    },
  }
}

/**
 * The client addresses of a log: every distinct string held (up to `maxStrings`) in an open
 * addressing table that grows as needed, with an exact count per string. Unlike the direct-mapped
 * `interner`, a string is never evicted, so counting costs one increment per line and nothing
 * else. Once `maxStrings` are held, new strings are returned uncounted (`counted` is false) and
 * the caller counts them its own (bounded) way.
 */
export interface ClientTable {
  /** The string of the ASCII bytes `buf[s, e)`; sets `counted`. */
  get(buf: Buffer, s: number, e: number): string
  /** Whether the last `get` counted its string here. */
  readonly counted: boolean
  /** How many times each held string was asked for. */
  counts(): Map<string, number>
}

/** Creates a client table holding at most `maxStrings` strings of at most `maxLength` bytes. */
export function clientTable(maxStrings = 1 << 18, maxLength = 128): ClientTable {
  let size = 1 << 14
  let mask = size - 1
  let strings: (string | undefined)[] = new Array(size)
  let hits = new Float64Array(size)
  let held = 0

  /** The slot of a hash (the same mixing as `get`). */
  const slotOf = (h: number) => (h ^ (h >>> 16)) & mask

  function grow() {
    const oldStrings = strings
    const oldHits = hits
    size *= 2
    mask = size - 1
    strings = new Array(size)
    hits = new Float64Array(size)
    for (let i = 0; i < oldStrings.length; i++) {
      const str = oldStrings[i]
      if (str === undefined) continue
      let h = 0x811c9dc5 | 0
      for (let j = 0; j < str.length; j++) h = Math.imul(h ^ str.charCodeAt(j), 0x01000193)
      let slot = slotOf(h)
      while (strings[slot] !== undefined) slot = (slot + 1) & mask
      strings[slot] = str
      hits[slot] = oldHits[i] as number
    }
  }

  const table = {
    counted: false,
    get(buf: Buffer, s: number, e: number): string {
      const n = e - s
      if (n > maxLength) {
        table.counted = false
        return buf.toString('utf8', s, e)
      }
      let h = 0x811c9dc5 | 0
      for (let i = s; i < e; i++) {
        const c = buf[i] as number
        if (c >= 0x80) {
          table.counted = false
          return buf.toString('utf8', s, e)
        }
        h = Math.imul(h ^ c, 0x01000193)
      }
      // Linear probing; no stored hashes: comparing the held string touches memory the lookup
      // needs anyway, and at most half the slots are used.
      let slot = slotOf(h)
      for (let str = strings[slot]; str !== undefined; str = strings[slot]) {
        if (str.length === n) {
          let i = 0
          while (i < n && str.charCodeAt(i) === buf[s + i]) i++
          if (i === n) {
            hits[slot] = (hits[slot] as number) + 1
            table.counted = true
            return str
          }
        }
        slot = (slot + 1) & mask
      }
      const str = buf.toString('latin1', s, e)
      if (held >= maxStrings) {
        table.counted = false
        return str
      }
      strings[slot] = str
      hits[slot] = 1
      held++
      if (held * 2 > size) grow()
      table.counted = true
      return str
    },
    counts() {
      const out = new Map<string, number>()
      for (let i = 0; i < size; i++) {
        const str = strings[i]
        if (str !== undefined) out.set(str, hits[i] as number)
      }
      return out
    },
  }
  return table
}
