/**
 * The most admitted by one key in any span of `windowMs`: a request at `ts` counts while
 * `now − ts < windowMs` (the sliding log's own rule, so the exact log never exceeds its limit).
 * Keys are small integers (interned by the caller); times per key must not decrease.
 */
export interface SpanTracker {
  add(key: number, ts: number, cost: number): void
  /** `key` is the interned key of the maximum. */
  readonly max: { count: number; key: number; atMs: number }
}

/** Creates a tracker for spans of `windowMs`. */
export function spanTracker(windowMs: number): SpanTracker {
  const times: number[][] = []
  const costs: number[][] = []
  const heads: number[] = []
  const sums: number[] = []
  const max = { count: 0, key: -1, atMs: 0 }
  return {
    add(key, ts, cost) {
      let t = times[key]
      let c = costs[key] as number[]
      if (t === undefined) {
        for (let k = times.length; k <= key; k++) {
          times.push([])
          costs.push([])
          heads.push(0)
          sums.push(0)
        }
        t = times[key] as number[]
        c = costs[key] as number[]
      }
      let head = heads[key] as number
      let sum = sums[key] as number
      while (head < t.length && ts - (t[head] as number) >= windowMs) {
        sum -= c[head] as number
        head++
      }
      if (head > 1024 && head * 2 > t.length) {
        t = times[key] = t.slice(head)
        c = costs[key] = c.slice(head)
        head = 0
      }
      t.push(ts)
      c.push(cost)
      sum += cost
      heads[key] = head
      sums[key] = sum
      if (sum > max.count) {
        max.count = sum
        max.key = key
        max.atMs = ts
      }
    },
    max,
  }
}
