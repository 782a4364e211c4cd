/**
 * Counts over time in a bounded number of buckets. The bucket width starts at one second and
 * steps up a ladder of round widths (each a multiple of the one before: 1 s, 5 s, 10 s, 30 s, 1 m,
 * 5 m, …), merging buckets, whenever the span would need more than `maxBuckets`.
 * Times must not decrease by more than one bucket (the replay keeps them in order).
 */
export interface Timeline {
  /** Adds `n` to series `series` at time `t` (epoch ms). */
  add(t: number, series: number, n?: number): void
  /** Bucket start times (epoch ms) and one count array per series. */
  snapshot(): { widthMs: number; starts: number[]; series: number[][] }
}

const S = 1000
const LADDER = [
  S,
  5 * S,
  10 * S,
  30 * S,
  60 * S,
  300 * S,
  600 * S,
  1800 * S,
  3600 * S,
  7200 * S,
  21_600 * S,
  43_200 * S,
  86_400 * S,
]

/** The next width of the ladder (doubling past a day). */
function nextWidth(w: number): number {
  return LADDER.find((l) => l > w) ?? w * 2
}

/** Creates a timeline of `seriesCount` series. */
export function timeline(seriesCount: number, maxBuckets = 720, startMs = S): Timeline {
  let width = startMs
  let base = Number.NaN
  let length = 0
  let data = Array.from({ length: seriesCount }, () => new Float64Array(maxBuckets))

  function widen() {
    const next = nextWidth(width)
    const f = next / width
    const newBase = Math.floor(base / f)
    const merged = Array.from({ length: seriesCount }, () => new Float64Array(maxBuckets))
    for (let s = 0; s < seriesCount; s++) {
      const from = data[s] as Float64Array
      const to = merged[s] as Float64Array
      for (let i = 0; i < length; i++) {
        const j = Math.floor((base + i) / f) - newBase
        to[j] = (to[j] as number) + (from[i] as number)
      }
    }
    length = length === 0 ? 0 : Math.floor((base + length - 1) / f) - newBase + 1
    base = newBase
    width = next
    data = merged
  }

  return {
    add(t, series, n = 1) {
      let index = Math.floor(t / width)
      if (Number.isNaN(base)) base = index
      while (index - base >= maxBuckets) {
        widen()
        index = Math.floor(t / width)
      }
      const i = Math.max(0, index - base)
      if (i >= length) length = i + 1
      const d = data[series] as Float64Array
      d[i] = (d[i] as number) + n
    },
    snapshot() {
      if (Number.isNaN(base)) return { widthMs: width, starts: [], series: data.map(() => []) }
      return {
        widthMs: width,
        starts: Array.from({ length }, (_, i) => (base + i) * width),
        series: data.map((d) => Array.from(d.subarray(0, length))),
      }
    },
  }
}
