import { stat } from 'node:fs/promises'
import path from 'node:path'
import { loadPolicy as loadGatewayPolicy } from '../config/validate.js'
import { counted, int } from '../report/format.js'
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
import { type ReplayResult, replayLog } from './engine.js'
import type { JsonFields } from './json-line.js'
import {
  compilePolicy,
  keysHeld,
  PolicyError,
  type PolicyRule,
  policyFromRules,
  REPLAY_MAX_KEYS,
} from './policy.js'
import { progressBar } from './progress.js'
import { htmlReport, textReport } from './report.js'

export { type ReplayOptions, type ReplayResult, type RuleReport, replayLog } from './engine.js'
export { compilePolicy, loadPolicy, PolicyError, type PolicyRule, policyFromRules } from './policy.js'

/** `edgelimit replay --help`. */
export const REPLAY_USAGE = `Usage: edgelimit replay <access.log[.gz]>... [options]

Evaluates a policy over access logs with the logs' own timestamps, in shadow, and reports what
each rule would have blocked, the top keys and a timeline (table, and an HTML report).
Reads Common/Combined Log Format and JSON lines (auto-detected per line), gzip by content; '-' is stdin.

Options:
  -c, --config <file>      the gateway's policy file (edgelimit.yaml); see docs/simulate-replay.md.
                           Not with the one-rule flags below (a usage error)
  --algorithm <name>       without --config: one rule of this algorithm (default sliding-window)
  --limit <n>              without --config: its limit, 1 to 2147483647 (default 100)
  --window <duration>      without --config: its window (default 60s)
  --key <parts>            without --config: what it counts by, e.g. ip, ip+path,
                           header:user-agent (default ip)
  --mode <shadow|enforce>  shadow: nothing blocked, every rule counted as in shadow mode (default);
                           enforce: rules walked as the gateway does, the first enforced denial
                           blocks the request before later rules see it
  --format <auto|clf|json> line format (default auto)
  --field <name=source>    JSON field mapping, repeatable: time, ip, user, method, path, status,
                           userAgent, host, query (e.g. --field time=ts --field ip=client.addr)
  --reorder <duration>     put lines back in time order within this horizon (default 2m; 0: file
                           order); older lines are decided at the latest time seen, and counted
  --html <file>            HTML report (default edgelimit-replay.html); - for standard output
  --no-html                no HTML report
  --json <file>            the full result as JSON; - for standard output (the report then goes
                           to standard error)
  --top <n>                keys listed per top list (default 10)
  --max-keys <n>           keys held per rule (LRU beyond; default: the policy's memory store
                           maxKeys, as serve holds them; 1000000 without one)
  --no-progress            no progress bar (shown only on a terminal anyway)
  --fail-on-block          exit 1 when any request would be blocked (for CI); with --mode
                           enforce, when any was blocked (shadow rules' denials do not count)
  -h, --help               this help
Exit codes: 0 done, 1 with --fail-on-block and blocks found, 2 usage, policy or input error
(a log of which no line is a request included).
`

/** The flags of the one rule replayed without a policy: with --config, a contradiction. */
const ONE_RULE_FLAGS = ['algorithm', 'limit', 'window', 'key'] as const

const FIELDS = new Set(['time', 'ip', 'user', 'method', 'path', 'status', 'userAgent', 'host', 'query'])

/**
 * `edgelimit replay`: the CLI entry point. Returns the exit code; never throws for bad input.
 * @example process.exitCode = await runReplay(process.argv.slice(3), process)
 */
export function runReplay(args: string[], io: CliIo): Promise<number> {
  return runCommand(
    'replay',
    io,
    () => replay(args, io),
    (e) => e instanceof PolicyError,
  )
}

async function replay(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args)
  if (values.help === true) {
    io.stdout.write(REPLAY_USAGE)
    return 0
  }
  if (positionals.length === 0) throw new UsageError(`no log file given\n\n${REPLAY_USAGE}`)
  const cwd = workingDirectory(io)
  const at = (f: string) => path.resolve(cwd, f)
  const oneRule = ONE_RULE_FLAGS.filter((f) => values[f] !== undefined).map((f) => `--${f}`)
  if (values.config !== undefined && oneRule.length > 0)
    throw new UsageError(
      `${oneRule.length === 1 ? `${oneRule[0]} describes` : `${oneRule.slice(0, -1).join(', ')} and ${oneRule.at(-1)} describe`} the one rule replayed without --config; the policy's rules are replayed instead: give one or the other`,
    )
  const policy = values.config === undefined ? undefined : loadGatewayPolicy(at(values.config)).config
  const rules = policy !== undefined ? compilePolicy(policy) : quickRule(values)
  const mode = values.mode ?? 'shadow'
  if (mode !== 'shadow' && mode !== 'enforce')
    throw new UsageError(`--mode: expected shadow or enforce, got "${mode}"`)
  const format = values.format ?? 'auto'
  if (format !== 'auto' && format !== 'clf' && format !== 'json')
    throw new UsageError(`--format: expected auto, clf or json, got "${format}"`)
  const fields: Partial<Record<keyof JsonFields, string[]>> = {}
  for (const f of values.field ?? []) {
    const [name, source] = f.split('=', 2)
    if (name === undefined || source === undefined || source === '' || !FIELDS.has(name))
      throw new UsageError(`--field: expected <${[...FIELDS].join('|')}>=<json field>, got "${f}"`)
    fields[name as keyof JsonFields] = [...(fields[name as keyof JsonFields] ?? []), source]
  }
  const reorderMs = values.reorder === '0' ? 0 : durationFlag('reorder', values.reorder, 120_000, '2m, or 0')
  const top = positiveInt('top', values.top, 10)
  // The policy's own bound, so that the replay holds (and forgets) the keys serve would.
  const maxKeys = positiveInt(
    'max-keys',
    values['max-keys'],
    policy === undefined ? REPLAY_MAX_KEYS : keysHeld(policy.store),
    MAX_STORE_KEYS,
  )
  const inputs = positionals.map((p) => (p === '-' ? '-' : at(p)))
  let total = 0
  for (const f of inputs) if (f !== '-') total += (await stat(f)).size
  // A replay runs for a while: a report it could not write, or would write over a file it reads,
  // stops it before, not after.
  const out = outputsOf(io, at, {
    '--html': values['no-html'] === true ? undefined : (values.html ?? 'edgelimit-replay.html'),
    '--json': values.json,
  })
  const html = out.file('--html')
  await checkOutputs(
    [
      ['--html', html],
      ['--json', out.file('--json')],
    ],
    [
      ['policy', policy === undefined ? undefined : at(values.config as string)],
      ...inputs.map((f) => ['log', f] as const),
    ],
  )
  const bar =
    values['no-progress'] === true ? undefined : progressBar(io.stderr, total > 0 ? total : undefined)
  let result: ReplayResult
  try {
    result = await replayLog({
      inputs,
      rules,
      mode,
      format,
      fields,
      maxKeys,
      top,
      reorderMs,
      onProgress: bar === undefined ? undefined : (p) => bar.update(p),
    })
  } finally {
    bar?.done()
  }
  const label = positionals.map((p) => path.basename(p)).join(', ')
  out.report.write(textReport(result, label, top))
  await out.write('--html', () => htmlReport(result, label, top))
  if (html !== undefined) out.report.write(`\nHTML report: ${html}\n`)
  await out.write('--json', () => `${JSON.stringify(result, null, 2)}\n`)
  const rate = Math.round((result.lines / Math.max(1, result.elapsedMs)) * 1000)
  io.stderr.write(
    `replayed ${counted(result.lines, 'line')} in ${(result.elapsedMs / 1000).toFixed(2)} s (${rate.toLocaleString('en-US')} lines/s)\n`,
  )
  // Malformed lines are skipped, but a log none of whose lines could be read says nothing: a
  // `--fail-on-block` gate would pass on it. Its report is out; this is the error.
  if (result.requests === 0 && result.malformed.count > 0) {
    io.stderr.write(`edgelimit replay: ${nothingRead(result, format)}\n`)
    return 2
  }
  // What the headline counts: blocked in enforce mode (not shadow rules' denials), denied in shadow.
  const blocked = result.mode === 'enforce' ? result.blocked : result.denied
  return values['fail-on-block'] === true && blocked > 0 ? 1 : 0
}

/** Why a replay with malformed lines and no request decided nothing: the main reasons, a hint. */
function nothingRead(result: ReplayResult, format: string): string {
  const reasons = Object.entries(result.malformed.byReason)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 2)
    .map(([reason, n]) => `${int(n)} ${reason}`)
    .join('; ')
  const none =
    result.lines === 1
      ? 'the one line is not a request'
      : `none of the ${counted(result.lines, 'line')} is a request`
  const hint =
    format === 'auto'
      ? 'is it a Common/Combined access log or JSON lines (see --format and --field)?'
      : `is --format (${format}) right?`
  return `${none} (${reasons}): ${hint}`
}

function parse(args: string[]) {
  return parseCommandArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      config: { type: 'string', short: 'c' },
      algorithm: { type: 'string' },
      limit: { type: 'string' },
      window: { type: 'string' },
      key: { type: 'string' },
      mode: { type: 'string' },
      format: { type: 'string' },
      field: { type: 'string', multiple: true },
      html: { type: 'string' },
      'no-html': { type: 'boolean' },
      json: { type: 'string' },
      reorder: { type: 'string' },
      top: { type: 'string' },
      'max-keys': { type: 'string' },
      'no-progress': { type: 'boolean' },
      'fail-on-block': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  })
}

/** The one-rule policy of `--algorithm/--limit/--window/--key`. */
function quickRule(values: {
  algorithm?: string
  limit?: string
  window?: string
  key?: string
}): PolicyRule[] {
  const algorithm = values.algorithm ?? 'sliding-window'
  const limit = positiveInt('limit', values.limit, 100, MAX_LIMIT)
  // Checked as a flag (a usage error naming it), then passed on as written, as the table shows it.
  durationFlag('window', values.window, undefined, '60s')
  const window = values.window ?? '60s'
  const params: Record<string, unknown> = ['fixed-window', 'sliding-log', 'sliding-window'].includes(
    algorithm,
  )
    ? { limit, window }
    : algorithm === 'token-bucket'
      ? { capacity: limit, refillRate: limit, refillInterval: window }
      : algorithm === 'leaky-bucket'
        ? { capacity: limit, leakRate: limit, leakInterval: window }
        : { limit, period: window }
  const key = (values.key ?? 'ip').split('+').map((k) => k.trim())
  return policyFromRules([{ name: algorithm, algorithm, key: key.length === 1 ? key[0] : key, ...params }])
}

/** The most keys the library's memory store holds (its `maxKeys` bound, 2^31 - 1). */
const MAX_STORE_KEYS = 2 ** 31 - 1
