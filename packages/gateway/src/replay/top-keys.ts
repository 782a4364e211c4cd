/**
 * The most frequent keys of a stream in bounded memory (lossy counting): counts are exact until
 * `capacity` distinct keys are held; then all but the `capacity / 4` most frequent are dropped
 * (found by selection, linear time), and a key counted again after being dropped may be short by
 * at most the largest count dropped so far (`maxUndercount`).
 */
export interface TopKeys {
  add(key: string): void
  /** Adds counts made elsewhere. */
  merge(counts: ReadonlyMap<string, number>): void
  /** The `n` most frequent keys, highest first: `[key, count, maxUndercount]`. */
  top(n: number): [string, number, number][]
  /** A key's count (short by at most its `maxUndercount`); undefined once it was dropped. */
  count(key: string): number | undefined
  /** Distinct keys seen: exact while no key was dropped, else a lower bound. */
  readonly distinct: number
  /** Whether `distinct` and every count are exact. */
  readonly exact: boolean
}

/** Creates a counter holding at most `capacity` keys. */
export function topKeys(capacity = 100_000): TopKeys {
  let counts = new Map<string, number>()
  let error = 0
  let dropped = 0
  const undercount = new Map<string, number>()

  function prune() {
    const values = new Float64Array(counts.size)
    let i = 0
    for (const c of counts.values()) values[i++] = c
    const keep = Math.max(1, Math.floor(capacity / 4))
    const threshold = kthLargest(values, keep)
    const next = new Map<string, number>()
    let floor = 0
    for (const [k, c] of counts) {
      if (c > threshold || (c === threshold && next.size < keep)) next.set(k, c)
      else {
        if (c > floor) floor = c
        undercount.delete(k)
        dropped++
      }
    }
    counts = next
    error = Math.max(error, floor)
  }

  return {
    add(key) {
      const c = counts.get(key)
      if (c !== undefined) {
        // The second lookup finds the entry the first one just brought into the cache.
        counts.set(key, c + 1)
        return
      }
      if (counts.size >= capacity) prune()
      counts.set(key, 1)
      if (error > 0) undercount.set(key, error)
    },
    merge(more) {
      if (counts.size === 0 && more.size <= capacity) {
        // Into an empty counter (the usual case): taken whole, exact.
        counts = new Map(more)
        return
      }
      for (const [key, n] of more) {
        const c = counts.get(key)
        if (c !== undefined) counts.set(key, c + n)
        else {
          if (counts.size >= capacity) prune()
          counts.set(key, n)
          if (error > 0) undercount.set(key, error)
        }
      }
    },
    top(n) {
      let entries: [string, number][]
      if (counts.size <= n) entries = [...counts.entries()]
      else {
        // Only the keys at or above the n-th count are sorted (found by selection, linear time).
        const values = new Float64Array(counts.size)
        let i = 0
        for (const c of counts.values()) values[i++] = c
        const threshold = kthLargest(values, n)
        entries = []
        for (const e of counts) if (e[1] >= threshold) entries.push(e)
      }
      return entries
        .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
        .slice(0, n)
        .map(([k, c]) => [k, c, undercount.get(k) ?? 0])
    },
    count(key) {
      return counts.get(key)
    },
    get distinct() {
      return counts.size + dropped
    },
    get exact() {
      return dropped === 0
    },
  }
}

/** The k-th largest value (1-based) by quickselect; reorders `a`. */
function kthLargest(a: Float64Array, k: number): number {
  let lo = 0
  let hi = a.length - 1
  const target = Math.min(k, a.length) - 1
  while (lo < hi) {
    const pivot = a[(lo + hi) >> 1] as number
    let i = lo
    let j = hi
    while (i <= j) {
      while ((a[i] as number) > pivot) i++
      while ((a[j] as number) < pivot) j--
      if (i <= j) {
        const t = a[i] as number
        a[i] = a[j] as number
        a[j] = t
        i++
        j--
      }
    }
    if (target <= j) hi = j
    else if (target >= i) lo = i
    else break
  }
  return a[target] as number
}
