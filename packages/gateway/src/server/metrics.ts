import type { LimiterEvent } from 'edgelimit'
import { Counter, collectDefaultMetrics, Gauge, Histogram, type Metric, Registry } from 'prom-client'
import type { CompiledRule } from '../policy/compile.js'
import { VERSION } from '../version.js'
import {
  createDashboardData,
  type DashboardData,
  type DashboardDataOptions,
  expectedOutcomes,
  type Outcome,
} from './dashboard-data.js'

/** The gateway's Prometheus instruments, on a registry of their own. */
export interface Metrics {
  readonly registry: Registry
  /**
   * One decision of one rule (outcome: allowed, denied, shadow_denied, or unknown when the rule's
   * state is not known for the request: failing open, or not asked); `key`, the hashed store key,
   * feeds the dashboard's top keys (never a label: it would make unbounded series).
   */
  decision(rule: string, tier: string, outcome: Outcome, key?: string): void
  /**
   * The rules put in force (at start, and by each reload): the decisions (and would-block) series
   * their modes produce are there at 0 from then on, as the dashboard lists them before traffic;
   * on a `remote` store, so is the fallback series of each rule that asks it (not `local` ones).
   */
  inForce(rules: readonly CompiledRule[], remote: boolean): void
  /**
   * Events of a limiter on a remote store: latency, errors, fallbacks, breaker. The breaker gauge
   * of (rule, tier) follows the newest limiter made for it (a reload that changes a rule makes a
   * new one), never a retired one. `openMs`: how long its breaker stays open; once passed, the
   * gauge says half-open (the next call probes) though the breaker changes only on that call.
   */
  limiterEvents(rule: string, tier: string, openMs: number): (event: LimiterEvent) => void
  /**
   * Removes the breaker gauge and dashboard entry of (rule, tier) once no limiter in force has it
   * (a reload removed the rule or tier, or moved it to an in-process store): the limiters that
   * had it change them no more.
   */
  forgetBreaker(rule: string, tier: string): void
  /**
   * One answered request: the status sent (or `aborted`: cut off after its head), the upstream's
   * (or `error`, `aborted`, `none`), and how long the gateway had it, in seconds (shaping delay
   * and upstream included).
   */
  response(status: number | 'aborted', upstream: number | 'error' | 'aborted' | 'none', seconds: number): void
  delayed(rule: string, ms: number): void
  /**
   * One reload, counted by its result; `edgelimit_config_last_reload_successful` says it until
   * the next (a failure: the file on disk is not the policy that runs).
   */
  reload(result: 'success' | 'failure'): void
  /** The policy file is the text in force again (a rejected edit undone): nothing is wrong any more. */
  fileInForce(): void
  /** Requests being handled (read when /metrics is scraped). */
  inFlight: number
  /** WebSocket tunnels open (read when /metrics is scraped). */
  tunnels: number
  /**
   * Keys the memory store holds for the limiters in force (read when /metrics is scraped);
   * undefined on other stores, which then report no `edgelimit_memory_store_keys`.
   */
  memoryStoreKeys: () => number | undefined
  readonly generation: Gauge
  /** The same decisions and store events, per second, for the live dashboard (`/dashboard`). */
  readonly dashboard: DashboardData
}

const BREAKER = { closed: 0, 'half-open': 1, open: 2 } as const

/** The `kind` of every store error a limiter reports (`edgelimit_store_errors_total`). */
const STORE_ERROR_KINDS: readonly Extract<LimiterEvent, { type: 'store-error' }>['kind'][] = [
  'error',
  'timeout',
  'breaker-open',
]

/** A count per label set, kept as a plain number and handed to prom-client when scraped. */
interface Tally {
  readonly labels: readonly string[]
  n: number
  published: number
}

/** Per-request counters cost a number increment; `/metrics` publishes what was added since. */
function tallies(counter: Counter) {
  const all: Tally[] = []
  return {
    /** `exported`: the series is there at 0 at once, not only once counted. */
    create(labels: readonly string[], exported = false): Tally {
      const tally = { labels, n: 0, published: 0 }
      all.push(tally)
      if (exported) counter.labels(...labels).inc(0)
      return tally
    },
    publish() {
      for (const t of all) {
        if (t.n > t.published) counter.labels(...t.labels).inc(t.n - t.published)
        t.published = t.n
      }
    },
  }
}

/** The buckets of `edgelimit_request_duration_seconds`: up to the upstream timeout (30 s) and past it. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/**
 * A label-less histogram fed once per request: a bucket search and two additions in a typed
 * array (prom-client's observe allocates and hashes labels per call), read when scraped.
 */
function requestDuration(registers: Registry[]) {
  const name = 'edgelimit_request_duration_seconds'
  // Per bucket (the last is +Inf), then the sum.
  const counts = new Float64Array(DURATION_BUCKETS.length + 2)
  const SUM = DURATION_BUCKETS.length + 1
  const get = async () => {
    const values = []
    let cumulative = 0
    for (let i = 0; i <= DURATION_BUCKETS.length; i++) {
      cumulative += counts[i] as number
      const le = i < DURATION_BUCKETS.length ? (DURATION_BUCKETS[i] as number) : '+Inf'
      values.push({ metricName: `${name}_bucket`, labels: { le }, value: cumulative })
    }
    values.push({ metricName: `${name}_sum`, labels: {}, value: counts[SUM] as number })
    values.push({ metricName: `${name}_count`, labels: {}, value: cumulative })
    return {
      name,
      help: 'Time from a request reaching the gateway to its answer ending, shaping delays included',
      type: 'histogram',
      values,
      aggregator: 'sum',
    }
  }
  // The registry reads a metric through get() (and reset()): the shape prom-client's own have.
  const metric = { name, get, reset: () => counts.fill(0) }
  for (const r of registers) r.registerMetric(metric as unknown as Metric)
  return (seconds: number) => {
    let i = 0
    while (i < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[i] as number)) i++
    counts[i] = (counts[i] as number) + 1
    counts[SUM] = (counts[SUM] as number) + seconds
  }
}

/**
 * Creates the instruments: `edgelimit_decisions_total{rule,tier,outcome}`,
 * `edgelimit_shadow_would_block_total{rule,tier}`, `edgelimit_store_latency_seconds`,
 * `edgelimit_store_errors_total{kind}`, `edgelimit_store_fallbacks_total{rule,mode}`,
 * `edgelimit_breaker_state{rule,tier}` (0 closed, 1 half-open or open past its openMs, 2 open),
 * `edgelimit_upstream_responses_total{code}`, `edgelimit_responses_total{code}`,
 * `edgelimit_request_duration_seconds`, `edgelimit_shaping_delay_seconds{rule}`,
 * `edgelimit_in_flight_requests`, `edgelimit_websocket_tunnels`, `edgelimit_memory_store_keys`,
 * `edgelimit_config_reloads_total{result}`, `edgelimit_config_last_reload_successful`,
 * `edgelimit_config_generation`, plus the process
 * metrics of prom-client.
 *
 * @example const metrics = createMetrics(); res.end(await metrics.registry.metrics())
 */
export function createMetrics(options: { dashboard?: DashboardDataOptions } = {}): Metrics {
  const dashboard = createDashboardData(options.dashboard)
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: 'edgelimit_' })
  const registers = [registry]
  // Which edgelimit and Node answer here, as Prometheus exporters say it: a constant 1 with labels.
  new Gauge({
    name: 'edgelimit_build_info',
    help: 'The running edgelimit: version and Node.js version as labels, value 1',
    labelNames: ['version', 'node'],
    registers,
  }).set({ version: VERSION, node: process.version }, 1)
  const state = {
    inFlight: 0,
    tunnels: 0,
    memoryStoreKeys: (): number | undefined => undefined,
  }
  // Counters fed per request are tallied in plain numbers (see `tallies`).
  const decisions = tallies(
    new Counter({
      name: 'edgelimit_decisions_total',
      help: 'Rate-limit decisions by rule, tier and outcome (allowed, denied, shadow_denied, unknown: failing open without its store)',
      labelNames: ['rule', 'tier', 'outcome'],
      registers,
      collect: () => decisions.publish(),
    }),
  )
  const wouldBlock = tallies(
    new Counter({
      name: 'edgelimit_shadow_would_block_total',
      help: 'Requests a rule in shadow mode (or outside its enforce share) would have blocked',
      labelNames: ['rule', 'tier'],
      registers,
      collect: () => wouldBlock.publish(),
    }),
  )
  const upstream = tallies(
    new Counter({
      name: 'edgelimit_upstream_responses_total',
      help: 'Upstream answers by status code (error: unreachable or timed out; aborted: client left)',
      labelNames: ['code'],
      registers,
      collect: () => upstream.publish(),
    }),
  )
  const responses = tallies(
    new Counter({
      name: 'edgelimit_responses_total',
      help: 'Answers sent to clients by status code (429/503 from rules included; aborted: cut off after its head)',
      labelNames: ['code'],
      registers,
      collect: () => responses.publish(),
    }),
  )
  const latency = new Histogram({
    name: 'edgelimit_store_latency_seconds',
    help: 'Round trip of one decision to a remote store',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.045, 0.1, 0.25],
    registers,
  })
  const storeErrors = new Counter({
    name: 'edgelimit_store_errors_total',
    help: 'Store calls that failed, timed out, or were not made because the breaker was open',
    labelNames: ['kind'],
    registers,
  })
  // Series known in advance are there at 0 from the start: Prometheus' increase() and rate() see
  // no rise in a series' first sample, so the first failed reload would raise no alert.
  for (const kind of STORE_ERROR_KINDS) storeErrors.labels(kind).inc(0)
  const fallbacks = new Counter({
    name: 'edgelimit_store_fallbacks_total',
    help: 'Rules decided by their onStoreError mode because the store failed',
    labelNames: ['rule', 'mode'],
    registers,
  })
  new Gauge({
    name: 'edgelimit_breaker_state',
    help: 'Store circuit breaker per rule limiter: 0 closed, 1 half-open (openMs passed: the next call probes), 2 open',
    labelNames: ['rule', 'tier'],
    registers,
    // Read when scraped from the states the dashboard keeps: the breaker has no timers, and an open
    // one whose openMs has passed would otherwise read open until its rule's next call.
    collect() {
      this.reset()
      for (const b of dashboard.breakers()) this.labels(b.rule, b.tier).set(BREAKER[b.state])
    },
  })
  const duration = requestDuration(registers)
  const shaping = new Histogram({
    name: 'edgelimit_shaping_delay_seconds',
    help: 'How long shaping rules held admitted requests',
    labelNames: ['rule'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  })
  const reloads = new Counter({
    name: 'edgelimit_config_reloads_total',
    help: 'Policy reloads by result (a failed reload keeps the previous policy)',
    labelNames: ['result'],
    registers,
  })
  for (const result of ['success', 'failure']) reloads.labels(result).inc(0)
  const lastReload = new Gauge({
    name: 'edgelimit_config_last_reload_successful',
    help: 'Whether the last reload put its policy in force (1; also at start), or it was rejected (0) and the previous policy runs',
    registers,
  })
  lastReload.set(1)
  new Gauge({
    name: 'edgelimit_in_flight_requests',
    help: 'Requests being handled',
    registers,
    collect() {
      this.set(state.inFlight)
    },
  })
  new Gauge({
    name: 'edgelimit_websocket_tunnels',
    help: 'WebSocket tunnels open (upgrades the upstream accepted, until either side closes)',
    registers,
    collect() {
      this.set(state.tunnels)
    },
  })
  new Gauge({
    name: 'edgelimit_memory_store_keys',
    help: 'Keys the memory store holds for the limiters in force (on the memory store only)',
    registers,
    collect() {
      const keys = state.memoryStoreKeys()
      if (keys === undefined) this.remove()
      else this.set(keys)
    },
  })
  const generation = new Gauge({
    name: 'edgelimit_config_generation',
    help: 'Generation of the policy in force (1 at start, +1 per successful reload)',
    registers,
  })

  // rule → tier → outcome, looked up without building strings.
  const byRule = new Map<string, Map<string, Map<string, Tally>>>()
  const blockedBy = new Map<string, Map<string, Tally>>()
  const byCode = new Map<number | string, Tally>()
  const byUpstream = new Map<number | string, Tally>()
  // (rule, tier) → the events of the limiter that owns its breaker gauge (the newest).
  const breakerOwners = new Map<string, object>()
  const nested = <T>(map: Map<string, Map<string, T>>, key: string): Map<string, T> => {
    let inner = map.get(key)
    if (inner === undefined) {
      inner = new Map()
      map.set(key, inner)
    }
    return inner
  }

  /** The tally of (rule, tier, outcome), made on first use (`exported`: at 0 at once). */
  const decided = (rule: string, tier: string, outcome: Outcome, exported = false): Tally => {
    const outcomes = nested(nested(byRule, rule), tier)
    let t = outcomes.get(outcome)
    if (t === undefined) {
      t = decisions.create([rule, tier, outcome], exported)
      outcomes.set(outcome, t)
    }
    return t
  }
  const blocked = (rule: string, tier: string, exported = false): Tally => {
    const tiers = nested(blockedBy, rule)
    let w = tiers.get(tier)
    if (w === undefined) {
      w = wouldBlock.create([rule, tier], exported)
      tiers.set(tier, w)
    }
    return w
  }

  return {
    registry,
    generation,
    dashboard,
    get inFlight() {
      return state.inFlight
    },
    set inFlight(n: number) {
      state.inFlight = n
    },
    get tunnels() {
      return state.tunnels
    },
    set tunnels(n: number) {
      state.tunnels = n
    },
    get memoryStoreKeys() {
      return state.memoryStoreKeys
    },
    set memoryStoreKeys(read: () => number | undefined) {
      state.memoryStoreKeys = read
    },
    decision(rule, tier, outcome, key) {
      dashboard.decision(rule, tier, outcome, key)
      decided(rule, tier, outcome).n++
      if (outcome === 'shadow_denied') blocked(rule, tier).n++
    },
    inForce(rules, remote) {
      for (const rule of rules) {
        // A fallback's first rise is seen by increase() only from a series already at 0.
        if (remote && rule.config.consistency !== 'local')
          fallbacks.labels(rule.name, rule.config.onStoreError).inc(0)
        const outcomes = expectedOutcomes(rule.config)
        for (const tier of rule.plans.keys()) {
          for (const outcome of outcomes) decided(rule.name, tier, outcome, true)
          if (outcomes.includes('shadow_denied')) blocked(rule.name, tier, true)
        }
      }
    },
    limiterEvents(rule, tier, openMs) {
      const owner = {}
      breakerOwners.set(`${rule}\n${tier}`, owner)
      dashboard.breaker(rule, tier, 'closed', openMs)
      return (event) => {
        switch (event.type) {
          case 'store-latency':
            latency.observe(event.ms / 1000)
            dashboard.latency(event.ms)
            break
          case 'store-error':
            storeErrors.labels(event.kind).inc()
            dashboard.storeError(event.kind)
            break
          case 'fallback':
            fallbacks.labels(rule, event.mode).inc()
            break
          case 'breaker':
            if (breakerOwners.get(`${rule}\n${tier}`) !== owner) break
            dashboard.breaker(rule, tier, event.state, openMs)
            break
        }
      }
    },
    forgetBreaker(rule, tier) {
      breakerOwners.delete(`${rule}\n${tier}`)
      dashboard.forgetBreaker(rule, tier)
    },
    response(status, up, seconds) {
      duration(seconds)
      let r = byCode.get(status)
      if (r === undefined) {
        r = responses.create([String(status)])
        byCode.set(status, r)
      }
      r.n++
      if (up === 'none') return
      let u = byUpstream.get(up)
      if (u === undefined) {
        u = upstream.create([String(up)])
        byUpstream.set(up, u)
      }
      u.n++
    },
    delayed(rule, ms) {
      shaping.labels(rule).observe(ms / 1000)
    },
    reload(result) {
      reloads.labels(result).inc()
      lastReload.set(result === 'success' ? 1 : 0)
    },
    fileInForce() {
      lastReload.set(1)
    },
  }
}
