// Approximate consistency against strict, on one recorded multi-process trace: store calls and
// admitted requests when 4 OS processes share one key through one redis-server.
//
//   npm run bench:approximate                 (builds edgelimit first)
//   node bench/approximate.mjs [--quick] [--repeats <n>] [--seed <n>] [--limit <n>] [--sync 50ms,250ms]
//                              [--trace <file>] [--save-trace <file>] [--no-write]
//
// The parent starts its own redis-server on a free 127.0.0.1 port (no persistence) and kills it by
// PID at the end, on error and on SIGINT/SIGTERM/SIGHUP. It records a trace (per process, when each
// request starts: Poisson arrivals plus bursts, from a seeded PRNG; packages/edgelimit/test/resilience/
// approx-trace.mjs), or reads one with --trace, and writes it to a file. Every run replays that same
// file: 4 worker processes (the resilience test's approx-worker.mjs, on the built package), each with
// its own ioredis client and limiter, wait until all are ready, then start their part of the trace
// on one key at the recorded times (calls overlap). Store calls are counted by redis-server
// (INFO commandstats: EVALSHA + EVAL since CONFIG RESETSTAT), admissions by the workers.
// Cases: strict with one store call per decision (`coalesce: false`, `denyCache: false`: every
// decision atomic in the store on its own), strict with the defaults (the Redis store coalesces the
// decisions of one tick into one EVALSHA; the denial cache answers known denials in-process), and
// approximate at each --sync interval (defaults otherwise); run in rounds (order alternating)
// --repeats times.
//
// Writes bench/results/approximate-<YYYY-MM-DD>.json and .md (UTC date).

import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { checkTrace, peakIn, recordTrace } from '../packages/edgelimit/test/resilience/approx-trace.mjs'
import { farWindow } from '../packages/edgelimit/test/support/far-window.mjs'
import { dirtyText, ROOT, runMeta, writeResults } from './lib/machine.mjs'
import { HOST, installCleanup, killOwnedSync, owned, tempDirs } from './lib/processes.mjs'
import { redisCommand, startRedis } from './lib/redis-server.mjs'

const DIST = path.join(ROOT, 'packages', 'edgelimit', 'dist')
const WORKER = path.join(ROOT, 'packages', 'edgelimit', 'test', 'resilience', 'approx-worker.mjs')

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

const PROCESSES = 4
const KEY = 'shared'
/** Per process: requests and the span they start in (≈ 1,000 per second per process). */
const TRACE = { full: { requests: 2000, durationMs: 2000 }, quick: { requests: 1000, durationMs: 1000 } }
/**
 * The limit per window (fixed window) is reached about three quarters into the trace: approximate
 * mode is about admitted traffic (the denial cache already spares the store most denied calls), and
 * the limit must still be reached so that over-admission shows.
 */
const LIMIT_SHARE = 0.75
/** The 1 % of the acceptance line. */
const TOLERANCE = 0.01
/** Store calls must drop by at least this factor versus strict. */
const RATIO = 10
const EXIT_MS = 5000

function parseArgs(argv) {
  const opts = { quick: false, repeats: 3, seed: 1, limit: undefined, sync: ['50ms', '250ms'], write: true }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      const v = argv[++i]
      if (v === undefined) throw new Error(`${arg} needs a value`)
      return v
    }
    if (arg === '--quick') opts.quick = true
    else if (arg === '--no-write') opts.write = false
    else if (arg === '--repeats') opts.repeats = Number(value())
    else if (arg === '--seed') opts.seed = Number(value())
    else if (arg === '--limit') opts.limit = Number(value())
    else if (arg === '--sync') opts.sync = value().split(',')
    else if (arg === '--trace') opts.trace = path.resolve(value())
    else if (arg === '--save-trace') opts.saveTrace = path.resolve(value())
    else throw new Error(`unknown option ${arg}`)
  }
  if (!Number.isInteger(opts.repeats) || opts.repeats < 1)
    throw new Error('--repeats takes a positive integer')
  if (opts.quick && !argv.includes('--repeats')) opts.repeats = 1
  return opts
}

// ---------------------------------------------------------------------------------------------
// Processes this script owns: redis-server (bench/lib/redis-server.mjs) and the workers, stopped
// by PID (bench/lib/processes.mjs)
// ---------------------------------------------------------------------------------------------

/** One worker process: its stdout lines, one at a time, and its exit. */
function startWorker(args) {
  const child = spawn(process.execPath, [WORKER, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  owned.set(child.pid, 'worker')
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const lines = []
  const waiting = []
  const exited = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      owned.delete(child.pid)
      for (const w of waiting.splice(0)) w.reject(new Error(`worker exited (${code ?? signal}): ${stderr}`))
      resolve({ code, signal })
    })
  })
  createInterface({ input: child.stdout }).on('line', (line) => {
    const w = waiting.shift()
    if (w === undefined) lines.push(line)
    else w.resolve(line)
  })
  return {
    child,
    exited,
    next: () =>
      lines.length > 0
        ? Promise.resolve(lines.shift())
        : new Promise((resolve, reject) => waiting.push({ resolve, reject })),
    /** Waits for the exit; SIGKILLs a worker that does not exit by itself within EXIT_MS. */
    async exit() {
      let timer
      const hung = await Promise.race([
        exited.then(() => false),
        new Promise((resolve) => {
          timer = setTimeout(() => resolve(true), EXIT_MS)
        }),
      ])
      clearTimeout(timer)
      if (hung) child.kill('SIGKILL')
      return { ...(await exited), hung }
    },
  }
}

/** Store calls since CONFIG RESETSTAT: EVALSHA plus EVAL (the first load, or after NOSCRIPT). */
async function scriptCalls(admin) {
  const info = await admin.info('commandstats')
  const calls = (name) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
  return calls('evalsha') + calls('eval')
}

/** The built package must be there (a concurrent cleaning build empties dist/ for a few seconds). */
async function builtPackage() {
  const files = ['index.js', 'redis.js'].map((f) => path.join(DIST, f))
  for (let waited = 0; !files.every((f) => existsSync(f)); waited += 500) {
    if (waited > 60_000) throw new Error(`${files.join(', ')} missing: run npm run build`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

// ---------------------------------------------------------------------------------------------
// One run: 4 processes replay the trace in one mode
// ---------------------------------------------------------------------------------------------

async function run(admin, port, mode, traceFile, limit, window, n) {
  await builtPackage()
  const prefix = `approx-bench-${n}-${Date.now()}`
  const options = (index) =>
    JSON.stringify({ trace: traceFile, index, limit, window, coalesce: mode.coalesce })
  const workers = Array.from({ length: PROCESSES }, (_, index) =>
    startWorker([
      String(port),
      prefix,
      KEY,
      mode.consistency,
      '0',
      '0',
      mode.denyCache,
      mode.sync,
      options(index),
    ]),
  )
  try {
    for (const w of workers) {
      const line = await w.next()
      if (line !== 'ready') throw new Error(`worker said ${line}`)
    }
    await admin.config('RESETSTAT')
    for (const w of workers) w.child.stdin.write('go\n')
    const results = await Promise.all(workers.map(async (w) => JSON.parse(await w.next())))
    const exits = await Promise.all(workers.map((w) => w.exit()))
    const storeCalls = await scriptCalls(admin)
    return {
      storeCalls,
      admitted: results.reduce((s, r) => s + r.admitted, 0),
      failed: results.reduce((s, r) => s + r.failed, 0),
      storeErrors: results.flatMap((r) => r.storeErrors),
      unhandled: results.flatMap((r) => r.unhandled),
      exitsClean: exits.every((e) => !e.hung && e.code === 0),
      perProcess: results.map((r) => ({
        admitted: r.admitted,
        requestsPerSecond: Math.round(r.rate),
        sentMs: Math.round(r.sentMs),
        maxBatch: r.maxBatch,
        peakPerInterval: r.peak,
        maxRttMs: Number(r.maxRttMs.toFixed(1)),
      })),
    }
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL')
  }
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

const int = (n) => n.toLocaleString('en-US')
const fixed = (n, d = 1) => (Number.isFinite(n) ? n.toFixed(n < 1 ? 2 : d) : '∞')

function markdown(report) {
  const { meta, trace, cases, targets } = report
  const load = meta.loadAverage
  const lines = [
    `# Approximate consistency benchmark — ${meta.date}`,
    '',
    `- Command: \`${meta.command}\`${meta.npmScript ? ` (runs \`${meta.npmScript}\`)` : ''}; each process runs \`node packages/edgelimit/test/resilience/approx-worker.mjs …\``,
    `- Node ${meta.node} (V8 ${meta.v8}), ${meta.platform}`,
    `- CPU: ${meta.cpu.model} × ${meta.cpu.cores} — shared by redis-server, the ${PROCESSES} worker processes and whatever else runs on the machine`,
    `- Redis ${meta.redis.version}, started by the benchmark: \`${meta.redis.args}\`; ioredis ${meta.versions.ioredis}`,
    `- Date: ${meta.date}; ${meta.durationSeconds} s in all; load average (1/5/15 min) ${load.before.join(' / ')} before, ${load.after.join(' / ')} after, at most ${load.maxOneMinute} during the run${load.maxOneMinute > meta.cpu.cores ? `\n- **The 1-minute load average exceeded the ${meta.cpu.cores} cores during this run: the workers were descheduled for long stretches and caught up in bursts, which makes batches larger (more over-admission) and lets the Redis store coalesce more decisions into one call (fewer strict store calls) than on a quiet machine.**` : ''}`,
    `- edgelimit ${meta.versions.edgelimit} at ${meta.git.head}${dirtyText(meta.git.dirty)}; build hash ${meta.edgelimitBuild} (sha-256 of dist/*.js)`,
    `- Trace: ${trace.source}; ${PROCESSES} processes × ${int(trace.requestsPerProcess)} requests (${int(trace.requests)} in all) on one key over ${trace.durationMs} ms; sha-256 ${trace.sha256}. Limit: \`fixedWindow({ limit: ${int(meta.limit)}, window: '${meta.window}' })\`, reached about ${Math.round(LIMIT_SHARE * 100)} % into the trace.`,
    '',
    `## Store calls and admissions (${meta.repeats} run${meta.repeats === 1 ? '' : 's'} per case, same trace)`,
    '',
    '| case | run | store calls | ÷ strict, one call per decision | ÷ strict, defaults | admitted | over the limit | largest batch per process | bound: limit + 1 % + batches | within |',
    '| :--- | ---: | ---: | ---: | ---: | ---: | ---: | :--- | ---: | :--- |',
  ]
  for (const c of cases) {
    c.runs.forEach((r, i) => {
      const approx = c.consistency === 'approximate'
      lines.push(
        `| ${c.label} | ${i + 1} | ${int(r.storeCalls)} | ${fixed(r.ratio)}× | ${fixed(r.ratioVsDefaults)}× | ${int(r.admitted)} | ${r.admitted - meta.limit >= 0 ? '+' : ''}${int(r.admitted - meta.limit)} | ${approx ? r.perProcess.map((p) => p.maxBatch).join(' / ') : '—'} | ${approx ? int(Math.floor(r.bound)) : int(meta.limit)} | ${r.within ? 'yes' : '**no**'} |`,
      )
    })
  }
  lines.push('', '## Targets', '')
  for (const t of targets) lines.push(`- ${t.text} — **${t.pass ? 'PASS' : 'FAIL'}**`)
  lines.push(
    '',
    '## Method',
    '',
    `- **Trace**: ${trace.description} Every run replays the same trace file; a worker starts its requests at the recorded times without waiting for earlier answers (they overlap), so a stalled process catches up in a burst.`,
    `- **Processes**: ${PROCESSES} OS processes, each with its own ioredis client (no offline queue) and limiter on the built package, \`timeout: '2s'\` (the deadline is not what is measured). All load the script and connect before the common start. Rule: \`{ consistency, syncInterval }\` as in the case; \`redisStore({ client, prefix, coalesce })\`. "One call per decision" is \`coalesce: false\` and \`denyCache: false\`; the defaults are \`coalesce: true\` (the decisions a process issues in one tick share one EVALSHA, so a burst costs one call) and the denial cache on.`,
    "- **Store calls**: counted by redis-server, `INFO commandstats` (EVALSHA + EVAL calls) after `CONFIG RESETSTAT` at the start, so they include approximate mode's first strict call per process, its syncs and the `flush()` at the end. ÷: the strict case's calls ÷ this case's, in the same round.",
    `- **Bound**: the acceptance line allows admissions within 1 % of the limit plus one batch per process. A process's batch is what it admits in-process between two of its store calls (what one sync charges), measured by each worker (its \`onEvent\` decisions between calls to the client); the bound adds each process's largest. Approximate mode must also admit at least the limit (strict admits exactly the limit).`,
    `- Per process (last run of each approximate case): requests/s, largest batch, most requests started within one sync interval, longest store round trip: ${cases
      .filter((c) => c.consistency === 'approximate')
      .map(
        (c) =>
          `${c.label}: ${c.runs
            .at(-1)
            .perProcess.map(
              (p) => `${p.requestsPerSecond}/s, ${p.maxBatch}, ${p.peakPerInterval}, ${p.maxRttMs} ms`,
            )
            .join('; ')}`,
      )
      .join(' — ')}.`,
    `- The fixed window is epoch-aligned (${meta.window}, picked at the start a day clear of both its ends: test/support/far-window.mjs), so no run counts in two windows.`,
    '',
  )
  return lines.join('\n')
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async function main() {
  const argv = process.argv.slice(2)
  const opts = parseArgs(argv)
  installCleanup()
  const started = Date.now()
  const loadBefore = os.loadavg()
  let maxLoad = loadBefore[0]
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-bench-approx-'))
  tempDirs.add(dir)

  // -- the trace: recorded once, replayed by every run ------------------------------------------
  const shape = opts.quick ? TRACE.quick : TRACE.full
  const trace = opts.trace
    ? checkTrace(JSON.parse(readFileSync(opts.trace, 'utf8')))
    : recordTrace({ processes: PROCESSES, ...shape, seed: opts.seed })
  if (trace.processes.length !== PROCESSES) throw new Error(`the trace must have ${PROCESSES} processes`)
  const traceFile = path.join(dir, 'trace.json')
  const traceText = JSON.stringify(trace)
  writeFileSync(traceFile, traceText)
  if (opts.saveTrace) writeFileSync(opts.saveTrace, traceText)
  const requests = trace.processes.reduce((s, p) => s + p.length, 0)
  const durationMs = Math.max(...trace.processes.map((p) => p.at(-1)))
  const limit = opts.limit ?? Math.round((requests * LIMIT_SHARE) / 100) * 100
  // Epoch-aligned, as fixed windows are: even a 365-day window ends (2026-12-18T00:00:00Z), and a
  // run that spanned an end would count in two windows. Picked once, a day clear of both ends.
  const window = farWindow()

  const modes = [
    {
      id: 'strict',
      label: 'strict, one store call per decision',
      consistency: 'strict',
      denyCache: 'off',
      coalesce: false,
      sync: '250ms',
    },
    {
      id: 'strict-defaults',
      label: 'strict, defaults (coalescing, denial cache)',
      consistency: 'strict',
      denyCache: 'on',
      coalesce: true,
      sync: '250ms',
    },
    ...opts.sync.map((sync) => ({
      id: `approximate-${sync}`,
      label: `approximate, syncInterval ${sync}${sync === '250ms' ? ' (default)' : ''}`,
      consistency: 'approximate',
      denyCache: 'on',
      coalesce: true,
      sync,
    })),
  ]

  const redis = await startRedis(dir)
  process.stderr.write(`redis-server pid ${redis.pid} on ${HOST}:${redis.port}\n`)
  const admin = new Redis({ host: HOST, port: redis.port, lazyConnect: true })
  await admin.connect()
  const redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? 'unknown'

  const byMode = new Map(modes.map((m) => [m.id, []]))
  let n = 0
  for (let round = 0; round < opts.repeats; round++) {
    const order = round % 2 === 0 ? modes : [...modes].reverse()
    const roundResults = new Map()
    for (const mode of order) {
      const r = await run(admin, redis.port, mode, traceFile, limit, window, n++)
      maxLoad = Math.max(maxLoad, os.loadavg()[0])
      roundResults.set(mode.id, r)
      process.stderr.write(
        `round ${round + 1} ${mode.label}: ${int(r.storeCalls)} store calls, ${int(r.admitted)} admitted\n`,
      )
    }
    const strict = roundResults.get('strict')
    const cached = roundResults.get('strict-defaults')
    for (const mode of modes) {
      const r = roundResults.get(mode.id)
      const batches = r.perProcess.reduce((s, p) => s + p.maxBatch, 0)
      const bound = mode.consistency === 'approximate' ? limit * (1 + TOLERANCE) + batches : limit
      const clean = r.failed === 0 && r.storeErrors.length === 0 && r.unhandled.length === 0 && r.exitsClean
      byMode.get(mode.id).push({
        ...r,
        ratio: strict.storeCalls / r.storeCalls,
        ratioVsDefaults: cached.storeCalls / r.storeCalls,
        batches,
        bound,
        clean,
        within: clean && r.admitted >= limit && r.admitted <= bound,
      })
    }
  }
  await admin.quit()
  await redis.stop()

  const cases = modes.map((m) => ({ ...m, runs: byMode.get(m.id) }))
  const targets = []
  for (const c of cases.filter((x) => x.consistency === 'approximate')) {
    // As the table shows them (two decimals), so that the two agree.
    const worstRatio = Math.min(...c.runs.map((r) => Number(r.ratio.toFixed(2))))
    const worstOver = Math.max(...c.runs.map((r) => r.admitted - limit))
    targets.push({
      case: c.id,
      text: `${c.label}: store calls ÷ strict (one call per decision) ≥ ${RATIO}× in every run (worst ${fixed(worstRatio)}×; ÷ strict with the defaults: worst ${fixed(Math.min(...c.runs.map((r) => Number(r.ratioVsDefaults.toFixed(2)))))}×) and admitted within limit + 1 % + one batch per process (most over the limit: ${worstOver >= 0 ? '+' : ''}${worstOver}, bounds ${c.runs.map((r) => int(Math.floor(r.bound))).join(', ')})`,
      pass: c.runs.every((r) => r.ratio >= RATIO && r.within),
    })
  }
  for (const c of cases.filter((x) => x.consistency === 'strict')) {
    targets.push({
      case: c.id,
      text: `${c.label}: admits exactly the limit (${int(limit)}) in every run (${c.runs.map((r) => int(r.admitted)).join(', ')})`,
      pass: c.runs.every((r) => r.clean && r.admitted === limit),
    })
  }

  const report = {
    benchmark: 'approximate',
    meta: {
      ...runMeta({
        script: 'bench/approximate.mjs',
        argv,
        started,
        loadBefore,
        maxLoad,
        dirtyPaths: ['packages/edgelimit', 'bench/approximate.mjs'],
        buildDir: DIST,
        packages: ['ioredis'],
        redis: { version: redisVersion, args: redisCommand(redis.args) },
      }),
      processes: PROCESSES,
      limit,
      window,
      repeats: opts.repeats,
    },
    trace: {
      source: opts.trace
        ? `read from ${path.relative(ROOT, opts.trace)}`
        : `recorded with seed ${trace.seed}`,
      description: opts.trace
        ? 'read from a file (per process, ascending start times in ms).'
        : `per process, ${Math.round((1 - trace.burstShare) * 100)} % Poisson arrivals at the mean rate and ${Math.round(trace.burstShare * 100)} % in bursts of ${trace.burstSize} requests within ${trace.burstMs} ms at random times (approx-trace.mjs \`recordTrace\`, seed ${trace.seed}); its busiest ${opts.sync.join(' / ')} per process: ${opts.sync.map((s) => trace.processes.map((p) => peakIn(p, Number.parseInt(s, 10))).join(', ')).join(' / ')} requests.`,
      requests,
      requestsPerProcess: Math.round(requests / PROCESSES),
      durationMs: Math.round(durationMs),
      sha256: createHash('sha256').update(traceText).digest('hex').slice(0, 16),
    },
    cases: cases.map((c) => ({
      id: c.id,
      label: c.label,
      consistency: c.consistency,
      denyCache: c.denyCache === 'on',
      syncInterval: c.consistency === 'approximate' ? c.sync : null,
      runs: c.runs.map((r) => ({
        storeCalls: r.storeCalls,
        ratio: Number(r.ratio.toFixed(2)),
        ratioVsDefaults: Number(r.ratioVsDefaults.toFixed(2)),
        admitted: r.admitted,
        overLimit: r.admitted - limit,
        batches: r.batches,
        bound: Math.floor(r.bound),
        within: r.within,
        failed: r.failed,
        storeErrors: r.storeErrors,
        unhandled: r.unhandled,
        exitsClean: r.exitsClean,
        perProcess: r.perProcess,
      })),
    })),
    targets,
  }

  const md = markdown(report)
  process.stdout.write(`${md}\n`)
  if (opts.write) {
    const { date } = report.meta
    writeResults(`approximate-${date}`, report, md)
    process.stderr.write(`wrote bench/results/approximate-${date}.{json,md}\n`)
  }
  if (!targets.every((t) => t.pass)) process.exitCode = 1
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`)
  killOwnedSync()
  process.exit(1)
})
