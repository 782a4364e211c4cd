import path from 'node:path'
import { MAX_DURATION_MS } from '../config/checker.js'
import { loadPolicy, PolicyError } from '../replay/policy.js'
import { counted } from '../report/format.js'
import {
  type CliIo,
  checkOutputs,
  durationFlag,
  MAX_LIMIT,
  outputsOf,
  parseCommandArgs,
  positiveInt,
  runCommand,
  UsageError,
  workingDirectory,
} from '../report/io.js'
import {
  ALGORITHM_IDS,
  type Contestant,
  defaultContestants,
  policyContestants,
  traceGaps,
} from './contestants.js'
import { type SimulationResult, simulate } from './engine.js'
import { htmlReport, textTable } from './report.js'
import { MAX_SCENARIO_REQUESTS, SCENARIOS, type Scenario, scenarioByName } from './scenarios.js'
import { readTrace } from './trace-file.js'

export { ALGORITHM_IDS, type Contestant, defaultContestants, policyContestants } from './contestants.js'
export { type AlgorithmResult, type SimulationResult, simulate } from './engine.js'
export { MAX_SCENARIO_REQUESTS, SCENARIOS, type Scenario, scenarioByName } from './scenarios.js'
export type { Trace } from './trace.js'
export { readTrace } from './trace-file.js'

/** `edgelimit simulate --help`. */
export const SIMULATE_USAGE = `Usage: edgelimit simulate [scenario...] [options]

Runs every algorithm (or the rules of a policy) over the same traffic on a simulated clock and
compares them: admitted, denied, the most admitted in any window span against the limit, false
blocks and misses against the exact sliding log, time to first block. Writes an HTML report.

Scenarios: ${SCENARIOS.map((s) => s.name).join(', ')}, or all (default)
Options:
  --trace <file>          simulate a trace file instead: an access log (CLF/JSON), JSON lines
                          {"t","key","cost"}, or time,key[,cost] lines
  -c, --config <file>     run the rules of this policy file (edgelimit.yaml) instead of every
                          algorithm; --limit/--window then only shape the scenario's traffic
  --limit <n>             the limit (default: the scenario's, 100; credential-stuffing 5); the
                          scenario traffic grows with it (at most ${MAX_SCENARIO_REQUESTS.toLocaleString('en-US')} requests)
  --window <duration>     the window (default 60s)
  --algorithms <a,b,...>  a subset of ${ALGORITHM_IDS.join(', ')}
  --seed <n>              random seed of the scenarios (default 1)
  --html <file>           HTML report (default edgelimit-simulate.html); - for standard output
  --no-html               no HTML report
  --json <file>           the results as JSON; - for standard output (the table then goes to
                          standard error)
  --list                  list the scenarios and exit
  -h, --help              this help
Exit codes: 0 done, 2 usage, policy or input error.
`

/**
 * `edgelimit simulate`: the CLI entry point. Returns the exit code; never throws for bad input.
 * @example process.exitCode = await runSimulate(['boundary-burst', '--no-html'], process)
 */
export function runSimulate(args: string[], io: CliIo): Promise<number> {
  return runCommand(
    'simulate',
    io,
    () => run(args, io),
    (e) => e instanceof PolicyError,
  )
}

async function run(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args)
  if (values.help === true) {
    io.stdout.write(SIMULATE_USAGE)
    return 0
  }
  if (values.list === true) {
    for (const s of SCENARIOS)
      io.stdout.write(`${s.name.padEnd(20)} ${s.title}: ${s.build({ seed: 1 }).description}\n`)
    return 0
  }
  const cwd = workingDirectory(io)
  const at = (f: string) => path.resolve(cwd, f)
  const limit = values.limit === undefined ? undefined : positiveInt('limit', values.limit, 100, MAX_LIMIT)
  const windowMs = durationFlag('window', values.window, undefined, '60s')
  if (windowMs !== undefined && windowMs > MAX_DURATION_MS)
    throw new UsageError(
      `--window: expected at most 366d (the longest window a rule takes), got "${values.window}"`,
    )
  const seed = positiveInt('seed', values.seed, 1)
  const only = values.algorithms?.split(',').map((s) => s.trim())
  const unknown = only?.filter((a) => !(ALGORITHM_IDS as readonly string[]).includes(a)) ?? []
  if (unknown.length > 0)
    throw new UsageError(
      `--algorithms: unknown ${unknown.map((a) => JSON.stringify(a)).join(', ')} (known: ${ALGORITHM_IDS.join(', ')})`,
    )
  const rules = values.config === undefined ? undefined : loadPolicy(at(values.config))
  const contestantsFor = (l: number, w: number): Contestant[] =>
    rules === undefined ? defaultContestants(l, w, only) : policyContestants(rules)

  // A report it could not write, or would write over the policy or trace it reads, stops the
  // simulation before it runs, not after its table.
  const out = outputsOf(io, at, {
    '--html': values['no-html'] === true ? undefined : (values.html ?? 'edgelimit-simulate.html'),
    '--json': values.json,
  })
  const html = out.file('--html')
  await checkOutputs(
    [
      ['--html', html],
      ['--json', out.file('--json')],
    ],
    [
      ['policy', values.config === undefined ? undefined : at(values.config)],
      ['trace', values.trace === undefined || values.trace === '-' ? undefined : at(values.trace)],
    ],
  )
  const results: SimulationResult[] = []
  if (values.trace !== undefined) {
    if (positionals.length > 0) throw new UsageError('give either --trace or scenario names, not both')
    // `-` is standard input, as for replay.
    const { trace, skipped } = await readTrace(values.trace === '-' ? '-' : at(values.trace), {
      limit: limit ?? 100,
      windowMs: windowMs ?? 60_000,
    })
    if (skipped.count > 0)
      io.stderr.write(
        `${values.trace}: ${counted(skipped.count, 'malformed line')} skipped: ${skipped.first.join('; ')}\n`,
      )
    for (const gap of traceGaps(rules ?? [], trace)) io.stderr.write(`${values.trace}: rule ${gap}\n`)
    results.push(simulate(trace, contestantsFor(trace.limit, trace.windowMs)))
  } else {
    const names =
      positionals.length === 0 || positionals.includes('all') ? SCENARIOS.map((s) => s.name) : positionals
    const scenarios = names.map((name) => {
      const scenario = scenarioByName(name)
      if (scenario === undefined)
        throw new UsageError(
          `unknown scenario "${name}" (known: ${SCENARIOS.map((s) => s.name).join(', ')}, all)`,
        )
      return scenario
    })
    if (limit !== undefined) checkSize(scenarios, limit, windowMs)
    for (const scenario of scenarios) {
      const trace = scenario.build({ limit, windowMs, seed })
      if (trace.n === 0) throw noRequests(scenario, { limit, windowMs, seed }, values.window)
      results.push(simulate(trace, contestantsFor(trace.limit, trace.windowMs)))
    }
  }
  out.report.write(results.map(textTable).join('\n'))
  await out.write('--html', () => htmlReport(results))
  if (html !== undefined) out.report.write(`\nHTML report: ${html}\n`)
  await out.write('--json', () => `${JSON.stringify(results, null, 2)}\n`)
  return 0
}

/**
 * The scenarios' traffic grows with the limit: one too large to build in memory is refused before
 * it is built, naming the largest --limit that works for every scenario given.
 */
function checkSize(scenarios: readonly Scenario[], limit: number, windowMs: number | undefined): void {
  const fits = (l: number) => scenarios.every((s) => s.size({ limit: l, windowMs }) <= MAX_SCENARIO_REQUESTS)
  if (fits(limit)) return
  const largest = scenarios.reduce((a, b) =>
    b.size({ limit, windowMs }) > a.size({ limit, windowMs }) ? b : a,
  )
  let [lo, hi] = [1, limit] // fits(lo): a limit of 1 makes a few thousand requests at most
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2)
    if (fits(mid)) lo = mid
    else hi = mid
  }
  const count = (n: number) => Math.round(n).toLocaleString('en-US')
  throw new UsageError(
    `--limit ${limit}: the ${largest.name} scenario would be about ${count(largest.size({ limit, windowMs }))} requests, ` +
      `more than the ${count(MAX_SCENARIO_REQUESTS)} simulate builds; ` +
      `--limit ${lo} is the most that works${scenarios.length > 1 ? ' for these scenarios' : ''}`,
  )
}

/**
 * A scenario that yields no requests (bursty's browsers start within its first 10 s, so 10 windows
 * of 1 ms hold none) has nothing to score, as a trace file without a request has not: a usage
 * error naming the smallest window that yields some, for this limit and seed.
 */
function noRequests(
  scenario: Scenario,
  options: { limit: number | undefined; windowMs: number | undefined; seed: number },
  window: string | undefined,
): UsageError {
  const yields = (w: number) =>
    scenario.size({ ...options, windowMs: w }) <= MAX_SCENARIO_REQUESTS &&
    scenario.build({ ...options, windowMs: w }).n > 0
  const given = `${scenario.name}${window === undefined ? '' : ` with --window ${window}`} yields no requests, nothing to simulate`
  let lo = options.windowMs ?? scenario.windowMs
  let hi = lo * 2
  while (hi <= MAX_DURATION_MS && !yields(hi)) [lo, hi] = [hi, hi * 2]
  if (hi > MAX_DURATION_MS) return new UsageError(given)
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2)
    if (yields(mid)) hi = mid
    else lo = mid
  }
  return new UsageError(`${given}; the smallest window that yields any is ${hi}ms (for seed ${options.seed})`)
}

function parse(args: string[]) {
  return parseCommandArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      trace: { type: 'string' },
      config: { type: 'string', short: 'c' },
      limit: { type: 'string' },
      window: { type: 'string' },
      algorithms: { type: 'string' },
      seed: { type: 'string' },
      html: { type: 'string' },
      'no-html': { type: 'boolean' },
      json: { type: 'string' },
      list: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  })
}
