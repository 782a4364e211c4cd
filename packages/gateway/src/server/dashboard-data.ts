import type { BreakerState } from 'edgelimit'

/**
 * What one rule decided for one request (as in `edgelimit_decisions_total`); `unknown`: the rule's
 * state is not known for it (`RuleDecision.unknown`: failing open while the store is unavailable,
 * or not asked), so it neither admitted nor denied it.
 */
export type Outcome = 'allowed' | 'denied' | 'shadow_denied' | 'unknown'

export const OUTCOMES: readonly Outcome[] = ['allowed', 'denied', 'shadow_denied', 'unknown']

const SHADOW: readonly Outcome[] = ['allowed', 'shadow_denied']
const ENFORCE: readonly Outcome[] = ['allowed', 'denied']
const PARTIAL: readonly Outcome[] = ['allowed', 'denied', 'shadow_denied']

/**
 * The outcomes a rule produces, by its mode: its series are shown (and exported) even before
 * traffic. `unknown` (its state not known: failing open, or not asked) only once it is counted.
 *
 * @example expectedOutcomes({ mode: 'shadow', enforce: 100 }) // ['allowed', 'shadow_denied']
 */
export function expectedOutcomes(rule: {
  readonly mode: 'enforce' | 'shadow'
  readonly enforce: number
}): readonly Outcome[] {
  if (rule.mode === 'shadow') return SHADOW
  return rule.enforce >= 100 ? ENFORCE : PARTIAL
}

/** Options of `createDashboardData`. */
export interface DashboardDataOptions {
  /** The clock, in epoch milliseconds. @default Date.now */
  now?: () => number
  /** How many one-second points are kept. @default 300 */
  seconds?: number
  /** How many (rule, key) pairs the top-keys table holds before it drops the least frequent. @default 4000 */
  topKeysCapacity?: number
}

/** One rule's count of one outcome: `rule/outcome` names it on the wire. */
export interface SeriesInfo {
  readonly key: string
  readonly rule: string
  readonly outcome: Outcome
  /** Since the gateway started. */
  readonly total: number
}

/** Store round trips within one second (remote stores only), in milliseconds. */
export interface LatencyPoint {
  readonly n: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

/** One second: decisions per series (absent = 0), store latency and store errors. */
export interface DashboardPoint {
  /** Epoch seconds. */
  readonly t: number
  readonly counts: Readonly<Record<string, number>>
  readonly latency?: LatencyPoint
  readonly errors: number
}

/** One row of the top-keys table: a rule's (hashed) key and what the rule decided for it. */
export interface KeyRow {
  readonly rule: string
  readonly tier: string
  readonly key: string
  readonly requests: number
  readonly allowed: number
  readonly denied: number
  readonly shadowDenied: number
  /** Requests for which the rule's state was not known (failing open, or not asked). */
  readonly unknown: number
  /** How many requests the counts may miss (the key was dropped once and came back); 0 = exact. */
  readonly maxUndercount: number
}

export interface BreakerInfo {
  readonly rule: string
  readonly tier: string
  /**
   * As the next call would find it: an open breaker whose `openMs` has passed is `half-open` (the
   * next call probes), though the breaker itself changes only on that call.
   */
  readonly state: BreakerState
  /** Epoch ms of the last change (or of the limiter's creation; of the end of `openMs` for the above). */
  readonly since: number
}

/** What the live dashboard shows, gathered from the gateway's decisions and limiter events. */
export interface DashboardData {
  /** One decision of one rule; `key` is the store key (hashed, never the raw client value). */
  decision(rule: string, tier: string, outcome: Outcome, key?: string): void
  /** One store round trip. */
  latency(ms: number): void
  storeError(kind: string): void
  /**
   * A breaker's state changed (or a new limiter's breaker, closed); `openMs`: how long it stays
   * open before the next call probes (without it, an open breaker is shown open until it changes).
   */
  breaker(rule: string, tier: string, state: BreakerState, openMs?: number): void
  /** Drops the breaker of (rule, tier): no limiter in force has it any more. */
  forgetBreaker(rule: string, tier: string): void
  /** Points from epoch second `since` on (all kept points by default); the last one is the current, partial second. */
  points(since?: number): DashboardPoint[]
  /**
   * Series with data in the kept points or counted since the start (beyond 64 series, those idle
   * for the whole window are left out; their totals stay, see `total`).
   */
  series(): SeriesInfo[]
  /** A rule's count of one outcome since the start, whether its series is still listed or not. */
  total(rule: string, outcome: Outcome): number
  /** The most frequent (rule, key) pairs since the start, highest first. */
  topKeys(n: number): KeyRow[]
  /** Whether every top-keys count is exact (no pair was dropped yet), and how many pairs are held. */
  keyStats(): { exact: boolean; held: number }
  breakers(): BreakerInfo[]
  storeErrors(): Readonly<Record<string, number>>
  readonly seconds: number
}

/** Latency histogram: 10 % wide buckets from 1 µs (bucket 0) to ~10 min. */
const LAT_BASE = 0.001
const LAT_GROWTH = 1.1
const LAT_BUCKETS = 290
const LOG_GROWTH = Math.log(LAT_GROWTH)

function bucketOf(ms: number): number {
  if (!(ms > LAT_BASE)) return 0
  return Math.min(LAT_BUCKETS - 1, Math.ceil(Math.log(ms / LAT_BASE) / LOG_GROWTH))
}

/** The upper bound of a bucket (the value reported for a quantile landing in it). */
function bucketTop(i: number): number {
  return LAT_BASE * LAT_GROWTH ** i
}

interface Series {
  readonly key: string
  readonly rule: string
  readonly outcome: Outcome
  total: number
  /** This second's count. */
  current: number
  /** The last epoch second counted. */
  lastSeen: number
}

interface Point {
  t: number
  /** Series counted in this second, with their counts. */
  entries: readonly (readonly [Series, number])[]
  latency: LatencyPoint | undefined
  errors: number
}

interface KeyEntry {
  readonly rule: string
  tier: string
  readonly key: string
  requests: number
  allowed: number
  denied: number
  shadowDenied: number
  unknown: number
  maxUndercount: number
}

const NONE: readonly (readonly [Series, number])[] = []
/**
 * Series beyond this many are forgotten once they have no data in the window: only their total
 * is kept, so that it goes on when they come back.
 */
const KEEP_SERIES = 64

/**
 * Creates the dashboard's bounded store: a ring of `seconds` one-second points (filled as the clock
 * passes each second — no timer), totals per series (of forgotten ones too: one number per rule and
 * outcome counted since the start, fewer than the label sets `edgelimit_decisions_total` holds for
 * good, and rule names come from the policy, never from requests), a top-keys table of at most
 * `topKeysCapacity` pairs (lossy counting: when full, the 3/4 least frequent are dropped and a
 * pair seen again afterwards may be short by at most the largest count dropped), and the state
 * of every store breaker.
 *
 * @example const data = createDashboardData(); data.decision('login', '', 'denied', key)
 */
export function createDashboardData(options: DashboardDataOptions = {}): DashboardData {
  const now = options.now ?? Date.now
  const seconds = Math.max(2, Math.floor(options.seconds ?? 300))
  const capacity = Math.max(4, Math.floor(options.topKeysCapacity ?? 4000))

  // Completed seconds, oldest first: a ring of `seconds - 1` (the current second is the last point).
  const ring: (Point | undefined)[] = new Array(seconds - 1)
  let head = 0
  let size = 0
  let current = Math.floor(now() / 1000)

  const byRule = new Map<string, Map<Outcome, Series>>()
  /** Totals of forgotten series, by series key: a series is here or in `byRule`, never in both. */
  const forgotten = new Map<string, number>()
  let touched: Series[] = []
  const histogram = new Uint32Array(LAT_BUCKETS)
  let latN = 0
  let latMax = 0
  let errors = 0
  const errorTotals: Record<string, number> = {}

  const keys = new Map<string, Map<string, KeyEntry>>()
  let keyCount = 0
  let dropped = 0
  let floor = 0

  const breakers = new Map<
    string,
    { rule: string; tier: string; state: BreakerState; since: number; openMs: number }
  >()

  function push(point: Point): void {
    const cap = ring.length
    ring[(head + size) % cap] = point
    if (size < cap) size++
    else head = (head + 1) % cap
  }

  function latencyPoint(): LatencyPoint | undefined {
    if (latN === 0) return undefined
    const rank = (q: number) => {
      const want = Math.max(1, Math.ceil(q * latN))
      let seen = 0
      for (let i = 0; i < LAT_BUCKETS; i++) {
        seen += histogram[i] as number
        if (seen >= want) return Math.min(bucketTop(i), latMax)
      }
      return latMax
    }
    return { n: latN, p50: rank(0.5), p99: rank(0.99), max: latMax }
  }

  /** Closes the current second and any empty ones up to `second`. */
  function roll(second: number): void {
    if (second <= current) return // the clock went back: keep counting into the current second
    push({
      t: current,
      entries: touched.length === 0 ? NONE : touched.map((s) => [s, s.current] as const),
      latency: latencyPoint(),
      errors,
    })
    for (const s of touched) s.current = 0
    touched = []
    if (latN > 0) {
      histogram.fill(0)
      latN = 0
      latMax = 0
    }
    errors = 0
    for (let t = Math.max(current + 1, second - ring.length); t < second; t++) {
      push({ t, entries: NONE, latency: undefined, errors: 0 })
    }
    current = second
    forgetIdleSeries()
  }

  let seriesCount = 0
  function forgetIdleSeries(): void {
    if (seriesCount <= KEEP_SERIES) return
    const oldest = current - ring.length
    for (const [rule, outcomes] of byRule) {
      for (const [outcome, s] of outcomes) {
        if (s.lastSeen < oldest) {
          forgotten.set(s.key, s.total)
          outcomes.delete(outcome)
          seriesCount--
        }
      }
      if (outcomes.size === 0) byRule.delete(rule)
    }
  }

  function tick(): void {
    const second = Math.floor(now() / 1000)
    if (second !== current) roll(second)
  }

  function seriesFor(rule: string, outcome: Outcome): Series {
    let outcomes = byRule.get(rule)
    if (outcomes === undefined) {
      outcomes = new Map()
      byRule.set(rule, outcomes)
    }
    let s = outcomes.get(outcome)
    if (s === undefined) {
      const key = `${rule}/${outcome}`
      s = { key, rule, outcome, total: forgotten.get(key) ?? 0, current: 0, lastSeen: current }
      forgotten.delete(key)
      outcomes.set(outcome, s)
      seriesCount++
    }
    return s
  }

  function prune(): void {
    const all: KeyEntry[] = []
    for (const m of keys.values()) for (const e of m.values()) all.push(e)
    all.sort((a, b) => b.requests - a.requests)
    const keep = Math.max(1, Math.floor(capacity / 4))
    for (let i = keep; i < all.length; i++) {
      const e = all[i] as KeyEntry
      if (e.requests > floor) floor = e.requests
      const m = keys.get(e.rule) as Map<string, KeyEntry>
      m.delete(e.key)
      if (m.size === 0) keys.delete(e.rule)
      dropped++
    }
    keyCount = Math.min(keep, all.length)
  }

  function countKey(rule: string, tier: string, outcome: Outcome, key: string): void {
    let m = keys.get(rule)
    if (m === undefined) {
      m = new Map()
      keys.set(rule, m)
    }
    let e = m.get(key)
    if (e === undefined) {
      if (keyCount >= capacity) {
        prune()
        m = keys.get(rule)
        if (m === undefined) {
          m = new Map()
          keys.set(rule, m)
        }
      }
      e = {
        rule,
        tier,
        key,
        requests: 0,
        allowed: 0,
        denied: 0,
        shadowDenied: 0,
        unknown: 0,
        maxUndercount: floor,
      }
      m.set(key, e)
      keyCount++
    }
    e.tier = tier
    e.requests++
    if (outcome === 'allowed') e.allowed++
    else if (outcome === 'denied') e.denied++
    else if (outcome === 'shadow_denied') e.shadowDenied++
    else e.unknown++
  }

  return {
    seconds,
    decision(rule, tier, outcome, key) {
      tick()
      const s = seriesFor(rule, outcome)
      if (s.current++ === 0) touched.push(s)
      s.total++
      s.lastSeen = current
      if (key !== undefined) countKey(rule, tier, outcome, key)
    },
    latency(ms) {
      tick()
      const b = bucketOf(ms)
      histogram[b] = (histogram[b] as number) + 1
      latN++
      if (ms > latMax) latMax = ms
    },
    storeError(kind) {
      tick()
      errors++
      errorTotals[kind] = (errorTotals[kind] ?? 0) + 1
    },
    breaker(rule, tier, state, openMs = Number.POSITIVE_INFINITY) {
      const id = `${rule}\n${tier}`
      const known = breakers.get(id)
      if (known === undefined) breakers.set(id, { rule, tier, state, since: now(), openMs })
      else {
        if (known.state !== state) {
          known.state = state
          known.since = now()
        }
        known.openMs = openMs
      }
    },
    forgetBreaker(rule, tier) {
      breakers.delete(`${rule}\n${tier}`)
    },
    points(since = Number.NEGATIVE_INFINITY) {
      tick()
      const out: DashboardPoint[] = []
      const wire = (p: Point): DashboardPoint => {
        const counts: Record<string, number> = {}
        for (const [s, n] of p.entries) counts[s.key] = n
        return p.latency === undefined
          ? { t: p.t, counts, errors: p.errors }
          : { t: p.t, counts, latency: p.latency, errors: p.errors }
      }
      for (let i = 0; i < size; i++) {
        const p = ring[(head + i) % ring.length] as Point
        if (p.t >= since) out.push(wire(p))
      }
      if (current >= since) {
        out.push(
          wire({
            t: current,
            entries: touched.map((s) => [s, s.current] as const),
            latency: latencyPoint(),
            errors,
          }),
        )
      }
      return out
    },
    series() {
      tick()
      const out: SeriesInfo[] = []
      for (const outcomes of byRule.values()) {
        for (const s of outcomes.values())
          out.push({ key: s.key, rule: s.rule, outcome: s.outcome, total: s.total })
      }
      return out
    },
    total(rule, outcome) {
      return byRule.get(rule)?.get(outcome)?.total ?? forgotten.get(`${rule}/${outcome}`) ?? 0
    },
    topKeys(n) {
      const all: KeyEntry[] = []
      for (const m of keys.values()) for (const e of m.values()) all.push(e)
      return all
        .sort((a, b) => b.requests - a.requests || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
        .slice(0, n)
        .map((e) => ({ ...e }))
    },
    keyStats() {
      return { exact: dropped === 0, held: keyCount }
    },
    breakers() {
      // The breaker has no timers: open, it lets the next call through once `openMs` has passed.
      const t = now()
      return [...breakers.values()].map(({ rule, tier, state, since, openMs }) =>
        state === 'open' && t >= since + openMs
          ? { rule, tier, state: 'half-open' as const, since: since + openMs }
          : { rule, tier, state, since },
      )
    },
    storeErrors() {
      return { ...errorTotals }
    },
  }
}
