import { randomBytes } from 'node:crypto'
import path from 'node:path'
import type { Limiter } from 'edgelimit'
import { PolicyError } from '../config/issues.js'
import { maskUrl } from '../config/secret.js'
import { MAX_TIMER_MS } from '../config/timer.js'
import type { StoreConfig } from '../config/types.js'
import { loadPolicy } from '../config/validate.js'
import { within } from '../library.js'
import { compilePolicy } from '../policy/compile.js'
import { openStore } from '../policy/store.js'
import { type Align, counted, duration, int, table } from '../report/format.js'
import {
  type CliIo,
  checkOutputs,
  decimalDigits,
  durationFlag,
  outputsOf,
  parseCommandArgs,
  positiveInt,
  runCommand,
  UsageError,
  workingDirectory,
} from '../report/io.js'
import { LatencyHistogram } from './histogram.js'

/** `edgelimit bench --help`. */
export const BENCH_USAGE = `Usage: edgelimit bench [options]

Measures what one decision of each rule of a policy costs on the policy's own store (memory,
Redis, Redis Cluster, Upstash): decisions per second and latency at each number of decisions in
flight, with admitted and denied counts. Keys are synthetic (bench:<run>:<level>:<n>, never a
client's key), taken round-robin; on a shared store they are written like any other key and
expire with the rule's window. A key that runs out of quota is denied from the local deny cache
without a round trip, as in the gateway: with few keys the figures are the deny cache's.

Options:
  -c, --config <file>       the policy (default edgelimit.yaml)
  --rule <name>             only this rule (repeatable; every plan of a tiered rule)
  --concurrency <n,n,...>   decisions in flight, one level each (default 1,16,256)
  --duration <duration>     measured time per level (default 2s), after a warm-up of a fifth of it
  --keys <n>                distinct keys per level, used round-robin (default 100000)
  --timeout <duration>      how long to wait for the store to be ready and answer a PING (default 5s,
                            at most 24d)
  --json <file>             the results as JSON; - for standard output (the table then goes to
                            standard error)
  -h, --help                this help
Exit codes: 0 done, 1 some decisions failed (rejected, not denied) or were answered without the
store (its onStoreError: the store failed during the run), 2 usage or policy error, or a store
that did not become ready or answer a PING (checked before anything is measured).
`

/** One rule (plan) at one level of decisions in flight. */
export interface BenchResult {
  /** The library rule: `<rule>` or `<rule>.<tier>`. */
  readonly rule: string
  readonly algorithm: string
  readonly inFlight: number
  /** Answers: admitted + denied + rejected. */
  readonly decisions: number
  readonly seconds: number
  readonly decisionsPerSecond: number
  /** Latency of one decision, µs (from the call to its answer; timing adds ~0.1 µs). */
  readonly latencyUs: {
    readonly p50: number
    readonly p99: number
    readonly p999: number
    readonly max: number
  }
  readonly admitted: number
  /** Denied by the limit (a value, not an error). */
  readonly denied: number
  /** Decided without the store: the rule's `onStoreError` answered (fail-open, fail-closed or local). */
  readonly storeUnavailable: number
  /** Rejected promises (not decisions at all), and calls still unanswered after the level. */
  readonly errors: number
  readonly firstError: string | undefined
}

/** What `edgelimit bench` reports. */
export interface BenchReport {
  readonly config: string
  readonly store: string
  readonly keys: number
  readonly durationMs: number
  readonly results: readonly BenchResult[]
}

/**
 * `edgelimit bench`: the CLI entry point. Returns the exit code; never throws for bad input.
 * @example process.exitCode = await runBench(['--config', 'edgelimit.yaml'], process)
 */
export function runBench(args: string[], io: CliIo): Promise<number> {
  return runCommand('bench', io, () => bench(args, io), isInputError)
}

/** A bad policy or a store that cannot be reached: the user's to fix, exit code 2. */
class StoreError extends Error {}

function isInputError(error: unknown): boolean {
  return error instanceof PolicyError || error instanceof StoreError
}

function levels(value: string | undefined): number[] {
  if (value === undefined) return [1, 16, 256]
  const list = value.split(',').map((s) => s.trim())
  const parsed = list.map(decimalDigits)
  if (list.length === 0 || parsed.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 100_000))
    throw new UsageError(
      `--concurrency: expected whole numbers from 1 to 100000 like 1,16,256, got "${value}"`,
    )
  return parsed
}

async function bench(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(args)
  if (values.help === true) {
    io.stdout.write(BENCH_USAGE)
    return 0
  }
  const at = (f: string) => path.resolve(workingDirectory(io), f)
  const inFlight = levels(values.concurrency)
  const durationMs = durationFlag('duration', values.duration, 2000, '2s')
  const timeoutMs = durationFlag('timeout', values.timeout, 5000, '5s')
  // One timer waits for the store: a Node timer of more than 2^31 - 1 ms fires at once.
  if (timeoutMs > MAX_TIMER_MS)
    throw new UsageError(`--timeout: expected at most 24d (Node's timer limit), got "${values.timeout}"`)
  const keyCount = positiveInt('keys', values.keys, 100_000)
  if (keyCount > MAX_KEYS)
    throw new UsageError(
      `--keys: at most ${MAX_KEYS.toLocaleString('en-US')} (they are held in memory), got ${values.keys}`,
    )
  const configFile = values.config ?? 'edgelimit.yaml'
  const { config } = loadPolicy(at(configFile))
  const wanted = values.rule ?? []
  const unknown = wanted.filter((name) => !config.rules.some((r) => r.name === name))
  if (unknown.length > 0)
    throw new UsageError(
      `--rule: no rule ${unknown.map((n) => `"${n}"`).join(', ')} in ${configFile} (rules: ${config.rules.map((r) => r.name).join(', ')})`,
    )

  // A bench runs for a while: an output it could not write should stop it before, not after.
  const out = outputsOf(io, at, { '--json': values.json })
  await checkOutputs([['--json', out.file('--json')]], [['policy', at(configFile)]])
  const report = out.report

  const store = await openStore(config.store)
  try {
    // Ready, then one round trip, both within --timeout: an Upstash store has no connection to be
    // ready, and a bench whose decisions never reached the store would only measure `onStoreError`.
    const until = performance.now() + timeoutMs
    try {
      await store.ready(timeoutMs)
      await store.ping(Math.max(1, Math.ceil(until - performance.now())))
    } catch (error) {
      throw new StoreError(`${config.store.type} store at ${address(config.store)}: ${reason(error)}`)
    }
    // Decisions the store did not make (`onStoreError` answered: open, closed or local), per plan.
    const withoutStore = new Map<string, { count: number }>()
    const policy = compilePolicy(config, store, undefined, (rule, tier) => {
      const counter = { count: 0 }
      withoutStore.set(tier === '' ? rule : `${rule}.${tier}`, counter)
      return (event) => {
        if (event.type === 'decision' && event.source === 'fallback') counter.count++
      }
    })
    const run = randomBytes(4).toString('hex')
    report.write(
      `edgelimit bench — ${configFile}, ${config.store.type} store, ${counted(keyCount, 'key')} per level, ${duration(durationMs)} per level (run ${run})\n\n`,
    )
    const results: BenchResult[] = []
    // Levels during which the store failed: their figures measured `onStoreError`, not the store.
    const degraded: string[] = []
    const rows: string[][] = []
    for (const rule of policy.rules) {
      if (wanted.length > 0 && !wanted.includes(rule.name)) continue
      for (const plan of rule.plans.values()) {
        const algorithm = rule.config.plans.find((p) => p.tier === plan.tier)?.algorithm.algorithm ?? ''
        for (const [i, n] of inFlight.entries()) {
          const keys = Array.from({ length: keyCount }, (_, k) => `bench:${run}:${i}:${k}`)
          const warmKeys = keys.map((k) => `${k}:warm`)
          // The memory store's limiters report no events: it is never unavailable.
          const fallbacks = withoutStore.get(plan.name) ?? { count: 0 }
          await level(plan.limiter, warmKeys, n, durationMs / 5, rule.config.cost, fallbacks)
          const r = await level(plan.limiter, keys, n, durationMs, rule.config.cost, fallbacks)
          const result: BenchResult = { rule: plan.name, algorithm, inFlight: n, ...r }
          results.push(result)
          if (result.storeUnavailable > 0)
            degraded.push(
              `${plan.name} at ${n} in flight: ${int(result.storeUnavailable)} of ${int(result.decisions)} decisions were answered without the store (onStoreError: ${rule.config.onStoreError}): these figures are not the store's`,
            )
          rows.push(row(result))
          if (io.stderr.isTTY === true)
            io.stderr.write(`${plan.name} at ${n} in flight: ${int(result.decisionsPerSecond)} decisions/s\n`)
        }
        await plan.limiter.flush()
      }
    }
    report.write(`${table(HEADER, rows, ALIGN)}\n`)
    const failed = results.filter((r) => r.errors > 0)
    for (const r of failed)
      report.write(`\n${r.rule} at ${r.inFlight} in flight: ${r.errors} decisions failed: ${r.firstError}`)
    for (const line of degraded) report.write(`\n${line}`)
    if (failed.length + degraded.length > 0) report.write('\n')
    await out.write('--json', () => {
      const json: BenchReport = {
        config: configFile,
        store: config.store.type,
        keys: keyCount,
        durationMs,
        results,
      }
      return `${JSON.stringify(json, null, 2)}\n`
    })
    return failed.length + degraded.length > 0 ? 1 : 0
  } finally {
    await store.close()
  }
}

/** Where the store is, credentials masked. */
function address(store: StoreConfig): string {
  if (store.type === 'memory') return 'memory'
  return store.type === 'redis-cluster' ? store.nodes.map(maskUrl).join(', ') : maskUrl(store.url)
}

/** An error's message, with its cause's code or message when it has one (fetch's `fetch failed`). */
function reason(error: unknown): string {
  const message = error instanceof Error ? error.message || error.name : String(error)
  const cause =
    error instanceof Error ? (error.cause as { code?: unknown; message?: unknown } | undefined) : undefined
  const more =
    typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : ''
  return more === '' || message.includes(more) ? message : `${message} (${more})`
}

/**
 * Runs `inFlight` callers of `limiter.limit` for `durationMs`, each taking the next key
 * round-robin. A caller stops at its first answer after the deadline. A decision still without an
 * answer a level's length later (at least `GRACE_MS`: a rule with `timeout: false` on a store
 * that stopped answering) is counted as failed and left behind: the level ends, never a hang.
 */
async function level(
  limiter: Limiter,
  keys: readonly string[],
  inFlight: number,
  durationMs: number,
  cost: number,
  withoutStore: { readonly count: number },
): Promise<Omit<BenchResult, 'rule' | 'algorithm' | 'inFlight'>> {
  const histogram = new LatencyHistogram()
  const options = { cost }
  let next = 0
  let admitted = 0
  let denied = 0
  const fallbacksBefore = withoutStore.count
  let errors = 0
  let firstError: string | undefined
  let waiting = 0
  const started = performance.now()
  const end = started + durationMs
  // Answers that need no I/O (the memory store, the deny cache) resolve as microtasks: callers
  // that only get those would keep the event loop from ever reaching the sockets, and a Redis
  // answer would wait for the end of the level. Every few ms all callers step aside together.
  let turn = started
  let pause: Promise<void> | undefined
  const stepAside = () =>
    (pause ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        pause = undefined
        turn = performance.now()
        resolve()
      }),
    ))
  const caller = async (): Promise<void> => {
    for (let t0 = performance.now(); t0 < end; t0 = performance.now()) {
      if (t0 - turn >= TURN_MS) {
        await stepAside()
        continue
      }
      const key = keys[next] as string
      next = next + 1 === keys.length ? 0 : next + 1
      waiting++
      try {
        const d = await limiter.limit(key, options)
        if (d.allowed) admitted++
        else denied++
      } catch (error) {
        errors++
        firstError ??= error instanceof Error ? error.message : String(error)
      } finally {
        waiting--
      }
      histogram.record((performance.now() - t0) * 1000)
    }
  }
  const graceMs = Math.max(GRACE_MS, durationMs)
  await within(Promise.all(Array.from({ length: inFlight }, caller)), durationMs + graceMs)
  const seconds = (performance.now() - started) / 1000
  const decisions = histogram.count
  if (waiting > 0) {
    errors += waiting
    firstError ??= `no answer ${duration(graceMs)} after the level ended (the rule has no timeout)`
  }
  return {
    decisions,
    seconds,
    decisionsPerSecond: decisions / seconds,
    latencyUs: {
      p50: histogram.quantile(0.5),
      p99: histogram.quantile(0.99),
      p999: histogram.quantile(0.999),
      max: histogram.max,
    },
    admitted,
    denied,
    storeUnavailable: withoutStore.count - fallbacksBefore,
    errors,
    firstError,
  }
}

/** How long callers run before they let the event loop turn, ms. */
const TURN_MS = 5
/** How long after a level's end its last answers are awaited: the level's length, at least this, ms. */
const GRACE_MS = 1000
/** The most keys per level (held in memory, about 50 bytes each). */
const MAX_KEYS = 1_000_000

const ALIGN: readonly Align[] = ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r']
const HEADER = [
  'rule',
  'algorithm',
  'in flight',
  'decisions/s',
  'p50',
  'p99',
  'p99.9',
  'max',
  'admitted',
  'denied',
  'store down',
  'failed',
]

function row(r: BenchResult): string[] {
  // No answer at all: no latency to show.
  const latency = (us: number) => (r.decisions === 0 ? '—' : formatUs(us))
  return [
    r.rule,
    r.algorithm,
    String(r.inFlight),
    int(r.decisionsPerSecond),
    latency(r.latencyUs.p50),
    latency(r.latencyUs.p99),
    latency(r.latencyUs.p999),
    latency(r.latencyUs.max),
    int(r.admitted),
    int(r.denied),
    int(r.storeUnavailable),
    int(r.errors),
  ]
}

/** µs below a millisecond, then ms, then s. */
function formatUs(us: number): string {
  if (us < 10) return `${us.toFixed(2)} µs`
  if (us < 1000) return `${us.toFixed(0)} µs`
  if (us < 1_000_000) return `${(us / 1000).toFixed(us < 10_000 ? 2 : 1)} ms`
  return `${(us / 1_000_000).toFixed(2)} s`
}

function parse(args: string[]) {
  return parseCommandArgs({
    args,
    allowPositionals: false,
    strict: true,
    options: {
      config: { type: 'string', short: 'c' },
      rule: { type: 'string', multiple: true },
      concurrency: { type: 'string' },
      duration: { type: 'string' },
      keys: { type: 'string' },
      timeout: { type: 'string' },
      json: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  })
}
