import { ConfigError, createLimiter, memoryStore, type StoreRule, slidingLog } from 'edgelimit'
import { duration } from '../report/format.js'
import { UsageError } from '../report/io.js'
import type { Contestant } from './contestants.js'
import { spanTracker } from './span.js'
import type { Trace } from './trace.js'

/** One contestant's outcome on a trace. */
export interface AlgorithmResult {
  readonly id: string
  readonly label: string
  readonly algorithm: string
  readonly options: Readonly<Record<string, unknown>>
  readonly limit: number
  readonly windowMs: number
  /** Requests it applied to. */
  readonly matched: number
  readonly admitted: number
  readonly denied: number
  /** The most one key got admitted in any span of `windowMs` (shaped requests counted when released). */
  readonly maxInSpan: { readonly count: number; readonly key: string; readonly atMs: number }
  /** Denied here, admitted by the exact sliding log of the same limit and window. */
  readonly falseBlocks: number
  /** Admitted here, denied by the exact sliding log. */
  readonly misses: number
  /** Ms from the start of the trace to the first denial. */
  readonly firstBlockMs: number | undefined
  /** Shaping delays (leaky bucket `shape`), ms. */
  readonly delay: { readonly max: number; readonly mean: number }
  readonly byGroup: Readonly<Record<string, { readonly admitted: number; readonly denied: number }>>
  /** Per bucket of the simulation's timeline. */
  readonly timeline: { readonly admitted: number[]; readonly denied: number[] }
}

/** A trace run through every contestant. */
export interface SimulationResult {
  readonly scenario: string
  readonly description: string
  readonly limit: number
  readonly windowMs: number
  readonly durationMs: number
  readonly requests: number
  readonly clients: number
  readonly bucketMs: number
  /** Bucket start times, ms from the start. */
  readonly starts: number[]
  /** Requests offered per bucket. */
  readonly offered: number[]
  readonly algorithms: AlgorithmResult[]
}

const NICE = [
  100, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000,
  3_600_000,
]

/** A round bucket width giving at most `max` buckets over `durationMs`. */
export function bucketWidth(durationMs: number, max = 300): number {
  return NICE.find((w) => durationMs / w <= max) ?? Math.ceil(durationMs / max / 3_600_000) * 3_600_000
}

/**
 * Runs every contestant over the same trace with a simulated clock (each request decided at its
 * trace time by the library's memory store, the synchronous path `limitSync` takes), and compares each decision with the exact sliding log
 * of the contestant's limit and window run over the same requests.
 *
 * @example simulate(SCENARIOS[2].build(), defaultContestants(100, 60_000))
 */
export function simulate(trace: Trace, contestants: readonly Contestant[]): SimulationResult {
  const bucketMs = bucketWidth(trace.durationMs)
  const buckets = Math.max(1, Math.ceil(trace.durationMs / bucketMs))
  const offered = new Array<number>(buckets).fill(0)
  for (let i = 0; i < trace.n; i++) {
    const b = Math.min(buckets - 1, Math.floor((trace.t[i] as number) / bucketMs))
    offered[b] = (offered[b] as number) + 1
  }
  const references = new Map<string, Uint8Array>()
  const reference = (c: Contestant) => {
    const id = `${c.scope ?? ''}|${c.nominal.limit}|${c.nominal.windowMs}`
    let ref = references.get(id)
    if (ref === undefined) {
      const { limit, windowMs } = c.nominal
      ref = run(
        trace,
        { ...c, id: 'reference', spec: slidingLog({ limit, window: windowMs }) },
        bucketMs,
        buckets,
        `${c.label}: cannot be scored: the exact sliding log of its burst and the time to refill it (${limit} per ${duration(windowMs)}) is past what a rule takes`,
      ).decisions
      references.set(id, ref)
    }
    return ref
  }
  const algorithms = contestants.map((c) => {
    const out = run(trace, c, bucketMs, buckets)
    const ref = reference(c)
    let falseBlocks = 0
    let misses = 0
    for (let i = 0; i < trace.n; i++) {
      const mine = out.decisions[i]
      const exact = ref[i]
      if (mine === DENIED && exact === ADMITTED) falseBlocks++
      else if (mine === ADMITTED && exact === DENIED) misses++
    }
    return { ...out.result, falseBlocks, misses }
  })
  return {
    scenario: trace.name,
    description: trace.description,
    limit: trace.limit,
    windowMs: trace.windowMs,
    durationMs: trace.durationMs,
    requests: trace.n,
    clients: trace.keys.length,
    bucketMs,
    starts: Array.from({ length: buckets }, (_, i) => i * bucketMs),
    offered,
    algorithms,
  }
}

const SKIPPED = 0
const ADMITTED = 1
const DENIED = 2

function run(trace: Trace, c: Contestant, bucketMs: number, buckets: number, what = c.label) {
  // Validated by createLimiter, then bound to a store of its own: the same rule and store the
  // limiter's synchronous path runs, without building a Decision per request.
  const name = c.id.replace(/[^\x21-\x7e]/g, '_').slice(0, 64) || 'rule'
  const rule = limiterRule(name, c, what)
  const store = memoryStore({ maxKeys: Math.max(100_000, trace.keys.length * 2) }).bind([rule])
  const keyOf = c.keyOf
  const ids = new Map<string, number>()
  const names: string[] = []
  const decisions = new Uint8Array(trace.n)
  const admittedAt = new Array<number>(buckets).fill(0)
  const deniedAt = new Array<number>(buckets).fill(0)
  const groups = trace.groups.map(() => ({ admitted: 0, denied: 0 }))
  const span = spanTracker(c.nominal.windowMs)
  let matched = 0
  let admitted = 0
  let denied = 0
  let firstBlockMs: number | undefined
  let maxDelay = 0
  let delaySum = 0
  for (let i = 0; i < trace.n; i++) {
    if (c.matches !== undefined && !c.matches(trace, i)) {
      decisions[i] = SKIPPED
      continue
    }
    matched++
    const t = trace.t[i] as number
    let key: string
    let id: number
    if (keyOf === undefined) {
      id = trace.key[i] as number
      key = trace.keys[id] as string
    } else {
      key = keyOf(trace, i)
      let known = ids.get(key)
      if (known === undefined) {
        known = names.push(key) - 1
        ids.set(key, known)
      }
      id = known
    }
    const cost = c.cost ?? (trace.cost === undefined ? 1 : (trace.cost[i] as number))
    const d = store.evaluateSync(key, cost, trace.originMs + t)[0] as { allowed: boolean; delayMs: number }
    const b = Math.min(buckets - 1, Math.floor(t / bucketMs))
    const g = groups[trace.group[trace.key[i] as number] as number] as { admitted: number; denied: number }
    if (d.allowed) {
      decisions[i] = ADMITTED
      admitted++
      admittedAt[b] = (admittedAt[b] as number) + 1
      g.admitted++
      const delay = d.delayMs
      if (delay > maxDelay) maxDelay = delay
      delaySum += delay
      span.add(id, t + delay, cost)
    } else {
      decisions[i] = DENIED
      denied++
      deniedAt[b] = (deniedAt[b] as number) + 1
      g.denied++
      if (firstBlockMs === undefined) firstBlockMs = t
    }
  }
  const result: Omit<AlgorithmResult, 'falseBlocks' | 'misses'> = {
    id: c.id,
    label: c.label,
    algorithm: c.spec.algorithm,
    options: c.spec.options,
    limit: c.nominal.limit,
    windowMs: c.nominal.windowMs,
    matched,
    admitted,
    denied,
    maxInSpan: {
      count: span.max.count,
      key:
        span.max.key < 0
          ? ''
          : ((keyOf === undefined ? trace.keys[span.max.key] : names[span.max.key]) as string),
      atMs: span.max.atMs,
    },
    firstBlockMs,
    delay: { max: maxDelay, mean: admitted === 0 ? 0 : delaySum / admitted },
    byGroup: Object.fromEntries(
      trace.groups.map((name, i) => [name, groups[i] as { admitted: number; denied: number }]),
    ),
    timeline: { admitted: admittedAt, denied: deniedAt },
  }
  return { decisions, result }
}

/**
 * The contestant's rule as `createLimiter` validates it. Options it refuses (a window past 366 d,
 * `limit × window` past exact arithmetic: flags, or a policy the gateway takes whose scoring log
 * is longer) are a usage error naming `what`, not a crash.
 */
function limiterRule(name: string, c: Contestant, what: string): StoreRule {
  try {
    return createLimiter({ rules: [{ name, algorithm: c.spec }] }).rules[0] as StoreRule
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    const issues = error.issues.map(
      (i) => `${i.path.replace(/^rules\[0\]\.algorithm\./, '')}: ${i.message} [${i.code}]`,
    )
    throw new UsageError(`${what}: ${issues.join('; ')}`, { cause: error })
  }
}
