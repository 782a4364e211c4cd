import type { LogRecord } from './record.js'

/**
 * Restores time order within a bounded horizon. Access logs are written when a request ends but
 * stamped with its start, so lines run out of order by up to the longest request (the sample log
 * by up to a minute). Records wait in per-second buckets (a ring covering the horizon) until the
 * newest time seen is `horizonMs` past them, or `maxHeld` are waiting; then they are released
 * oldest first, equal times in file order. A record older than what was already released is
 * released at once (the replay decides it at the latest time seen, and counts it as late).
 * A released record is reused afterwards: `release` must not keep it.
 */
export interface Reorder {
  push(r: LogRecord): void
  /** Releases everything held. */
  drain(): void
  readonly held: number
}

/** Creates a reorder buffer releasing records to `release`. */
export function reorder(horizonMs: number, maxHeld: number, release: (r: LogRecord) => void): Reorder {
  const size = Math.ceil(horizonMs / 1000) + 2
  const ring: LogRecord[][] = Array.from({ length: size }, () => [])
  // The oldest second not yet released; everything held is in [base, base + size).
  let base = Number.NaN
  let held = 0
  // Released records are reused for later lines: no allocation per line once warm.
  const pool: LogRecord[] = []

  /** The bucket of a second (a true modulo: the ring may start before the epoch). */
  const at = (second: number) => ring[((second % size) + size) % size] as LogRecord[]

  function flush(second: number) {
    const bucket = at(second)
    if (bucket.length === 0) return
    let sorted = true
    for (let i = 1; i < bucket.length && sorted; i++)
      sorted = (bucket[i - 1] as LogRecord).ts <= (bucket[i] as LogRecord).ts
    if (!sorted) bucket.sort((a, b) => a.ts - b.ts) // stable: equal times keep file order
    held -= bucket.length
    for (const r of bucket) {
      release(r)
      r.json = undefined
      pool.push(r)
    }
    bucket.length = 0
  }

  /** Releases every second before `until`. */
  function advance(until: number) {
    if (until - base >= size) {
      // A jump past the whole ring: release what is held in order, then move at once.
      for (let s = base; s < base + size; s++) flush(s)
      base = until
      return
    }
    for (; base < until; base++) flush(base)
  }

  return {
    push(r) {
      const second = Math.floor(r.ts / 1000)
      // The first line may be followed by older ones: the ring starts a horizon before it.
      if (Number.isNaN(base)) base = second - (size - 2)
      if (second < base) {
        release(r)
        return
      }
      if (second >= base + size) advance(second - size + 1)
      const copy = pool.pop() ?? { ...r }
      copy.ts = r.ts
      copy.ip = r.ip
      copy.user = r.user
      copy.method = r.method
      copy.path = r.path
      copy.status = r.status
      copy.query = r.query
      copy.host = r.host
      copy.ua = r.ua
      copy.json = r.json
      at(second).push(copy)
      held++
      const until = Math.floor((r.ts - horizonMs) / 1000)
      if (until > base) advance(until)
      while (held > maxHeld) advance(base + 1)
    },
    drain() {
      if (!Number.isNaN(base)) advance(base + size)
    },
    get held() {
      return held
    },
  }
}
