/** The smallest latency told apart, µs; anything below counts as this. */
const FLOOR_US = 0.01
/** Each bucket's upper bound is this much above the one before: quantiles within 1 %. */
const GROWTH = 1.01
const LOG_GROWTH = Math.log(GROWTH)
/** Up to FLOOR_US × GROWTH^BUCKETS ≈ 6 × 10⁸ µs (10 minutes); beyond goes in the last bucket. */
const BUCKETS = 2600

/**
 * Latencies in logarithmic buckets: a constant 10 KiB however many are recorded, quantiles
 * accurate to 1 % (each is reported as its bucket's upper bound, never below the true value).
 *
 * @example
 * const h = new LatencyHistogram()
 * h.record(12.5); h.record(80)
 * h.quantile(0.5) // 12.6 (12.5 within 1 %)
 */
export class LatencyHistogram {
  readonly #counts = new Float64Array(BUCKETS)
  #count = 0
  #max = 0

  record(us: number): void {
    const v = Number.isFinite(us) && us > FLOOR_US ? us : FLOOR_US
    const i = Math.min(BUCKETS - 1, Math.ceil(Math.log(v / FLOOR_US) / LOG_GROWTH))
    this.#counts[i] = (this.#counts[i] as number) + 1
    this.#count++
    if (v > this.#max) this.#max = v
  }

  get count(): number {
    return this.#count
  }

  /** The largest latency recorded, exactly; 0 when empty. */
  get max(): number {
    return this.#max
  }

  /** The `q` quantile (0 < q ≤ 1), µs: the least bucket bound with at least q of the values at or under it; 0 when empty. */
  quantile(q: number): number {
    if (this.#count === 0) return 0
    const rank = Math.max(1, Math.ceil(q * this.#count))
    let seen = 0
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.#counts[i] as number
      if (seen >= rank) return Math.min(this.#max, FLOOR_US * GROWTH ** i)
    }
    return this.#max
  }
}
