import { emptyRecord, type LogRecord } from './record.js'

/**
 * Restores time order within a bounded horizon. Access logs are written when a request ends but
 * stamped with its start, so lines run out of order by up to the longest request (the sample log
 * by up to a minute). Records wait in per-second buckets (a ring covering the horizon; past a day,
 * the ring keeps a day's number of buckets and each covers a longer span) until the
 * newest time seen is `horizonMs` past them, or `maxHeld` are waiting; then they are released
 * oldest first, equal times in file order. A record older than what was already released is
 * released at once (the replay decides it at the latest time seen, and counts it as late).
 * The record given to `release` is refilled for the next one: `release` must not keep it.
 */
export interface Reorder {
  push(r: LogRecord): void
  /** Releases everything held. */
  drain(): void
  readonly held: number
}

/** Creates a reorder buffer releasing records to `release`. */
export function reorder(horizonMs: number, maxHeld: number, release: (r: LogRecord) => void): Reorder {
  // A bucket per second up to a day; beyond, as many buckets, each wider: a bucket per second of
  // a '366d' horizon would be 31 million arrays, and of '100000d' more than an array can hold.
  const width = Math.max(1000, Math.ceil(horizonMs / MAX_BUCKETS))
  const size = Math.ceil(horizonMs / width) + 2
  // Held records live in columns (one array per field, indexed by slot), not as objects: a
  // bucket's records are read back in order from dense arrays, which the processor prefetches,
  // instead of from objects scattered over the heap. Freed slots are reused most recent first.
  let capacity = Math.min(1024, maxHeld + 1)
  let tsOf = new Float64Array(capacity)
  let statusOf = new Float64Array(capacity)
  const ipOf: string[] = []
  const userOf: string[] = []
  const methodOf: string[] = []
  const pathOf: string[] = []
  const queryOf: string[] = []
  const hostOf: string[] = []
  const uaOf: string[] = []
  const jsonOf: (Record<string, unknown> | undefined)[] = []
  const countedOf: boolean[] = []
  const free: number[] = []
  let used = 0
  // Per bucket: the slots held (the arrays keep their length: no reallocation per second), the
  // latest time pushed, and whether a push went back in time (then the bucket is sorted).
  const ring: number[][] = Array.from({ length: size }, () => [])
  const counts = new Int32Array(size)
  const latest = new Float64Array(size)
  const unsorted = new Uint8Array(size)
  // The oldest bucket not yet released; everything held is in [base, base + size).
  let base = Number.NaN
  let held = 0
  // The record handed to `release`, refilled for each.
  const out: LogRecord = emptyRecord()

  // Buckets are counted from the first base: small non-negative integers (epoch seconds are past
  // the small-integer range, and a modulo of doubles is a slow library call).
  let anchor = 0
  /** The ring index of a bucket (at or after `anchor`: everything held is at or after `base`). */
  const at = (bin: number) => (bin - anchor) % size

  function slot(): number {
    if (free.length > 0) return free.pop() as number
    if (used === capacity) {
      capacity = Math.min(capacity * 2, maxHeld + 1)
      const ts = new Float64Array(capacity)
      ts.set(tsOf)
      tsOf = ts
      const status = new Float64Array(capacity)
      status.set(statusOf)
      statusOf = status
    }
    return used++
  }

  function flush(bin: number) {
    const b = at(bin)
    const n = counts[b] as number
    if (n === 0) return
    const bucket = ring[b] as number[]
    if (unsorted[b] === 1) {
      // Stable: equal times keep file order.
      const sorted = bucket.slice(0, n).sort((x, y) => (tsOf[x] as number) - (tsOf[y] as number))
      for (let i = 0; i < n; i++) bucket[i] = sorted[i] as number
      unsorted[b] = 0
    }
    counts[b] = 0
    held -= n
    for (let i = 0; i < n; i++) {
      const k = bucket[i] as number
      out.ts = tsOf[k] as number
      out.ip = ipOf[k] as string
      out.user = userOf[k] as string
      out.method = methodOf[k] as string
      out.path = pathOf[k] as string
      out.status = statusOf[k] as number
      out.query = queryOf[k] as string
      out.host = hostOf[k] as string
      out.ua = uaOf[k] as string
      out.json = jsonOf[k]
      out.counted = countedOf[k] as boolean
      jsonOf[k] = undefined
      free.push(k)
      release(out)
    }
  }

  /** Releases every bucket before `until`. */
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
      const bin = Math.floor(r.ts / width)
      // The first line may be followed by older ones: the ring starts a horizon before it.
      if (Number.isNaN(base)) anchor = base = bin - (size - 2)
      if (bin < base) {
        release(r)
        return
      }
      if (bin >= base + size) advance(bin - size + 1)
      const k = slot()
      tsOf[k] = r.ts
      ipOf[k] = r.ip
      userOf[k] = r.user
      methodOf[k] = r.method
      pathOf[k] = r.path
      statusOf[k] = r.status
      queryOf[k] = r.query
      hostOf[k] = r.host
      uaOf[k] = r.ua
      jsonOf[k] = r.json
      countedOf[k] = r.counted === true
      const b = at(bin)
      const n = counts[b] as number
      if (n === 0) latest[b] = r.ts
      else if (r.ts < (latest[b] as number)) unsorted[b] = 1
      else latest[b] = r.ts
      ;(ring[b] as number[])[n] = k
      counts[b] = n + 1
      held++
      const until = Math.floor((r.ts - horizonMs) / width)
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

/** Buckets of the ring at most: a day of seconds. */
const MAX_BUCKETS = 86_400
