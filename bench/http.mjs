// Throughput of a hello-world server with and without edgelimit's HTTP adapter, per adapter.
//
//   npm run bench:http                  (builds edgelimit first)
//   node bench/http.mjs [--quick] [--only <adapter>[,<adapter>…]] [--no-deny] [--duration <s>] [--warmup <s>]
//                       [--slices <n>] [--repeats <n>] [--connections <n>] [--tool wrk|autocannon]
//                       [--no-write] [--dist <dir>]   (a build other than node_modules/edgelimit's)
//
// Every server runs in its own child process (bench/http/server.mjs) and is loaded by wrk on one
// thread (autocannon when wrk is not installed): 2 cores, one for the servers and one for the
// load. Paired slices: for each case, the server without and the server with the adapter are up
// at once, and the load alternates between them in short slices (without first in even pairs,
// with first in odd ones), so that the machine's speed, which drifts by tens of percent from one
// second to the next on a shared VM, hits both alike. REPEATS rounds, each with fresh processes.
// The verdict is the median of the per-pair ratios; the pooled ratio is shown beside it. The
// target: with the adapter ≥ 90% of the requests per second without it (scenario `admit`).
//
// Writes bench/results/http-<YYYY-MM-DD>.json and .md (UTC date).

import { spawn } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { ADAPTERS } from './http/adapters.mjs'
import { autocannon, wrk, wrkVersion } from './http/load.mjs'
import {
  dirtyText,
  flagValue,
  median,
  nodeOn,
  pinning,
  runMeta,
  snapshotEdgelimit,
  table,
} from './lib/machine.mjs'

const SELF = fileURLToPath(import.meta.url)
const ROOT = path.resolve(path.dirname(SELF), '..')
const RESULTS = path.join(ROOT, 'bench', 'results')
const SERVER = path.join(ROOT, 'bench', 'http', 'server.mjs')

const SCENARIOS = {
  admit: 'every request admitted: fixedWindow({ limit: 5e8, window: "1h" }), keyed by client address',
  deny: 'half denied: wrk alternates `/` (admitted as above) and `/deny` (route limiter of 1 per hour: 429)',
}
/** With the adapter, at least this share of the requests per second without it. */
const TARGET = 0.9

function parseArgs(argv) {
  const value = (name, fallback) => flagValue(argv, name, fallback)
  const quick = argv.includes('--quick')
  const tool = value('--tool', wrkVersion() === null ? 'autocannon' : 'wrk')
  return {
    quick,
    write: !argv.includes('--no-write'),
    only: value('--only', undefined),
    scenarios: argv.includes('--no-deny') ? ['admit'] : ['admit', 'deny'],
    // One slice: this many seconds of load on one of the two servers.
    duration: Number(value('--duration', 1)),
    warmup: Number(value('--warmup', quick ? 1 : 2)),
    // Pairs of slices (one without, one with) per round.
    slices: Number(value('--slices', quick ? 3 : 8)),
    // Rounds, each with a fresh pair of server processes.
    repeats: Number(value('--repeats', quick ? 1 : 2)),
    connections: Number(value('--connections', 50)),
    tool,
    dist: value('--dist', undefined),
    // The server on CPU 1 and wrk on CPU 0 (taskset), so that neither migrates onto the other's
    // CPU mid-run; `--no-pin` lets the scheduler place them.
    pin: pinning(argv),
  }
}

/** The package entries the servers import besides `edgelimit`: one per adapter. */
const ENTRIES = Object.keys(ADAPTERS).filter((a) => ADAPTERS[a].control !== true)
/** The cases of a scenario: a control row only where it measures something (admit). */
const casesOf = (adapters, scenario) =>
  adapters.filter((a) => scenario === 'admit' || ADAPTERS[a].control !== true)

/** Starts one server process; resolves { port, send(command) → reply, stop() }. */
async function startServer(spec, pin) {
  const argv = [...(spec.nodeArgs ?? []), SERVER, JSON.stringify(spec)]
  const [command, args] = nodeOn(pin ? 1 : undefined, argv)
  const child = spawn(command, args, {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const waiting = []
  createInterface({ input: child.stdout }).on('line', (line) => waiting.shift()?.resolve(JSON.parse(line)))
  const next = () =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve })
      exited.then((code) => reject(new Error(`server ${spec.adapter} exited with ${code}`)))
    })
  const { port } = await next()
  return {
    port,
    send(command) {
      const reply = next()
      child.stdin.write(`${command}\n`)
      return reply
    },
    async stop() {
      child.stdin.end()
      await exited
    },
  }
}

/**
 * One round of a case: the servers without and with the adapter, started fresh and up at once,
 * warmed, then loaded in `opts.slices` pairs of slices of `opts.duration` s each, the order within
 * a pair alternating. Resolves one entry per slice.
 */
async function runRound(scenario, adapter, round, opts, dist) {
  const servers = new Map()
  try {
    for (const limited of [false, true])
      servers.set(limited, await startServer({ adapter, limited, scenario, dist }, opts.pin))
    const load = opts.tool === 'wrk' ? wrk : autocannon
    const target = (limited) => ({
      url: `http://127.0.0.1:${servers.get(limited).port}/`,
      connections: opts.connections,
      alternate: scenario === 'deny',
      ...(opts.pin && opts.tool === 'wrk' ? { cpu: 0 } : {}),
    })
    if (opts.warmup > 0)
      for (const limited of [false, true]) await load({ ...target(limited), duration: opts.warmup })
    const slices = []
    for (let pair = 0; pair < opts.slices; pair++) {
      for (const limited of (pair + round) % 2 === 0 ? [false, true] : [true, false]) {
        const server = servers.get(limited)
        await server.send('mark')
        const loadAverage = Number(os.loadavg()[0].toFixed(2))
        const measured = await load({ ...target(limited), duration: opts.duration })
        const stats = await server.send('stats')
        slices.push({
          scenario,
          adapter,
          limited,
          round,
          pair,
          ...measured,
          served: stats.served,
          statuses: stats.statuses,
          cpuUs: stats.cpuUs,
          serverCpuUsPerRequest: stats.served > 0 ? stats.cpuUs / stats.served : null,
          serverCpuShare: stats.cpuUs / 1e6 / measured.seconds,
          loadAverage,
        })
      }
    }
    return slices
  } finally {
    await Promise.all([...servers.values()].map((s) => s.stop()))
  }
}

/** Requests per second, server CPU per request and statuses, summed over slices. */
function pool(slices) {
  const sum = (f) => slices.reduce((n, r) => n + f(r), 0)
  const served = sum((r) => r.served)
  const statuses = {}
  for (const r of slices)
    for (const [status, n] of Object.entries(r.statuses)) statuses[status] = (statuses[status] ?? 0) + n
  return {
    rps: sum((r) => r.requests) / sum((r) => r.seconds),
    cpuUsPerRequest: served > 0 ? sum((r) => r.cpuUs) / served : null,
    served,
    statuses,
  }
}

/** How the rows were measured, in words. */
const slicesText = (opts) =>
  `median of ${opts.repeats * opts.slices} pairs of ${opts.duration} s slices, ${opts.repeats} round${opts.repeats === 1 ? '' : 's'} of fresh processes`

const kps = (n) => (n === undefined ? '—' : `${Math.round(n).toLocaleString('en-US')}`)
const us = (n) => (n === null || n === undefined ? '—' : n.toFixed(1))
const pct = (x) => `${(x * 100).toFixed(1)}%`

/** Checks that a run measured what it claims: no errors, and the statuses the scenario implies. */
function verify(r) {
  const problems = []
  if (r.errors > 0) problems.push(`${r.errors} socket errors`)
  const denied = r.statuses['429'] ?? 0
  const other = r.served - (r.statuses['200'] ?? 0) - denied
  if (other > 0) problems.push(`${other} answers neither 200 nor 429`)
  if (r.scenario === 'admit' || !r.limited) {
    if (denied > 0 || r.non2xx > 0) problems.push(`${Math.max(denied, r.non2xx)} denied, expected none`)
  } else if (Math.abs(denied / r.served - 0.5) > 0.02)
    problems.push(`${pct(denied / r.served)} denied, expected 50%`)
  return problems
}

async function main(argv) {
  const opts = parseArgs(argv)
  const adapters = Object.keys(ADAPTERS).filter(
    (a) => opts.only === undefined || opts.only.split(',').includes(a),
  )
  const started = Date.now()
  const loadBefore = os.loadavg()
  const snapshot = await snapshotEdgelimit(ENTRIES, undefined, { from: opts.dist })
  const runs = []
  try {
    const total = opts.repeats * opts.scenarios.reduce((n, s) => n + casesOf(adapters, s).length, 0)
    let done = 0
    for (let round = 0; round < opts.repeats; round++) {
      const order = round % 2 === 0 ? adapters : [...adapters].reverse()
      for (const scenario of opts.scenarios) {
        for (const adapter of casesOf(order, scenario)) {
          const t0 = Date.now()
          const slices = await runRound(scenario, adapter, round, opts, snapshot.dir)
          for (const r of slices) r.problems = verify(r)
          runs.push(...slices)
          const side = (limited) => pool(slices.filter((r) => r.limited === limited))
          const [w0, w1] = [side(false), side(true)]
          const problems = slices.flatMap((r) => r.problems)
          process.stderr.write(
            `[${String(++done).padStart(2)}/${total}] ${scenario.padEnd(5)} ${adapter.padEnd(14)} without ${kps(w0.rps).padStart(7)} req/s ${us(w0.cpuUsPerRequest)} µs/req, with ${kps(w1.rps).padStart(7)} req/s ${us(w1.cpuUsPerRequest)} µs/req: ${pct(w1.rps / w0.rps)}, load ${os.loadavg()[0].toFixed(2)}${problems.length > 0 ? `  PROBLEM: ${problems.join('; ')}` : ''}  ${((Date.now() - t0) / 1000).toFixed(1)} s\n`,
          )
        }
      }
    }
  } finally {
    rmSync(snapshot.dir, { recursive: true, force: true })
  }

  const results = []
  for (const scenario of opts.scenarios) {
    for (const adapter of casesOf(adapters, scenario)) {
      const control = ADAPTERS[adapter].control === true
      const slices = runs.filter((r) => r.scenario === scenario && r.adapter === adapter)
      const side = (list, limited) => pool(list.filter((r) => r.limited === limited))
      const without = side(slices, false)
      const withAdapter = side(slices, true)
      // One ratio per pair of slices (the two back to back), over every round.
      const pairRatios = []
      for (let round = 0; round < opts.repeats; round++) {
        for (let pair = 0; pair < opts.slices; pair++) {
          const of = (limited) =>
            slices.find((r) => r.round === round && r.pair === pair && r.limited === limited)
          pairRatios.push(Number((of(true).rps / of(false).rps).toFixed(3)))
        }
      }
      const roundRatios = Array.from({ length: opts.repeats }, (_, round) => {
        const inRound = slices.filter((r) => r.round === round)
        return Number((side(inRound, true).rps / side(inRound, false).rps).toFixed(3))
      })
      const ratio = median(pairRatios)
      results.push({
        scenario,
        adapter,
        withoutRps: without.rps,
        withRps: withAdapter.rps,
        ratio,
        pooledRatio: withAdapter.rps / without.rps,
        pairRatios,
        roundRatios,
        withoutCpuUsPerRequest: without.cpuUsPerRequest,
        withCpuUsPerRequest: withAdapter.cpuUsPerRequest,
        addedCpuUsPerRequest: withAdapter.cpuUsPerRequest - without.cpuUsPerRequest,
        deniedFraction: (withAdapter.statuses['429'] ?? 0) / withAdapter.served,
        problems: slices.flatMap((r) => r.problems),
        control,
        pass: scenario === 'admit' && !control ? ratio >= TARGET : null,
      })
    }
  }
  const targets = results.filter((r) => r.pass !== null)
  const passed = targets.filter((r) => r.pass).length
  const meta = runMeta({
    script: 'bench/http.mjs',
    argv,
    started,
    loadBefore,
    dirtyPaths: ['packages/edgelimit/src'],
    snapshotHash: snapshot.hash,
    snapshotHead: snapshot.head,
    packages: ['express', 'fastify', 'hono', '@hono/node-server', 'autocannon'],
  })
  meta.versions.wrk = opts.tool === 'wrk' ? wrkVersion() : null
  const date = meta.date
  const rows = (scenario) =>
    results
      .filter((r) => r.scenario === scenario)
      .map((r) => [
        ADAPTERS[r.adapter].label,
        kps(r.withoutRps),
        kps(r.withRps),
        pct(r.ratio),
        `${pct(Math.min(...r.pairRatios))}–${pct(Math.max(...r.pairRatios))}`,
        `${pct(r.pooledRatio)} (${r.roundRatios.map(pct).join(' / ')})`,
        `${us(r.withoutCpuUsPerRequest)} → ${us(r.withCpuUsPerRequest)} (+${us(r.addedCpuUsPerRequest)})`,
        r.control
          ? 'control'
          : r.pass === null
            ? `${pct(r.deniedFraction)} denied`
            : r.pass
              ? 'PASS'
              : 'FAIL',
      ])
  const header = [
    'adapter',
    'without (req/s)',
    'with (req/s)',
    'with / without (median)',
    'pairs (range)',
    'pooled (per round)',
    'server CPU µs/req',
    'result',
  ]
  const align = ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'l']
  const tables = Object.fromEntries(opts.scenarios.map((s) => [s, table(header, rows(s), align)]))
  const problems = results.flatMap((r) => r.problems.map((p) => `${r.scenario}/${r.adapter}: ${p}`))

  console.log(
    `\nedgelimit HTTP adapter benchmark — ${date}, Node ${process.version}, ${meta.cpu.model} × ${meta.cpu.cores}\n`,
  )
  for (const scenario of opts.scenarios) {
    console.log(`Scenario ${scenario}: ${SCENARIOS[scenario]} (${slicesText(opts)}):\n`)
    console.log(tables[scenario].text)
    console.log('')
  }
  console.log(
    `Target: with the adapter ≥ ${pct(TARGET)} of the throughput without it — ${passed}/${targets.length} PASS`,
  )
  if (problems.length > 0) console.log(`\nPROBLEMS:\n  ${problems.join('\n  ')}`)
  console.log(
    `\n${meta.durationSeconds} s in all; load average ${meta.loadAverage.before.join(' / ')} before, ${meta.loadAverage.after.join(' / ')} after`,
  )

  if (!opts.write) return
  const method = {
    tool: opts.tool,
    toolCommand:
      opts.tool === 'wrk'
        ? `wrk -t1 -c${opts.connections} -d${opts.duration}s --latency <url> (deny: -s alternate.lua)`
        : `autocannon({ url, connections: ${opts.connections}, duration: ${opts.duration} })`,
    connections: opts.connections,
    warmupSeconds: opts.warmup,
    slicesPerRound: opts.slices,
    sliceSeconds: opts.duration,
    rounds: opts.repeats,
    roundIsAFreshPairOfProcesses: true,
    verdict: 'median of the per-pair ratios (with / without, back to back)',
    target: `with / without ≥ ${TARGET} (scenario admit)`,
    scenarios: Object.fromEntries(opts.scenarios.map((s) => [s, SCENARIOS[s]])),
    adapters: ADAPTERS,
    store: 'memoryStore() (the default)',
  }
  const json = {
    benchmark: 'http',
    ...meta,
    method,
    results,
    runs,
    summary: { passed, failed: targets.length - passed, total: targets.length, problems },
  }
  mkdirSync(RESULTS, { recursive: true })
  const base = path.join(
    RESULTS,
    `http-${date}${opts.quick ? '-quick' : ''}${opts.only ? `-${opts.only}` : ''}`,
  )
  writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`)
  writeFileSync(`${base}.md`, markdown(meta, opts, method, tables, passed, targets.length, problems))
  console.log(`wrote ${path.relative(ROOT, base)}.json and .md`)
}

function markdown(meta, opts, method, tables, passed, total, problems) {
  const sections = opts.scenarios
    .map((s) => `## Scenario \`${s}\`: ${SCENARIOS[s]}\n\n${tables[s].md}\n`)
    .join('\n')
  return `# HTTP adapter benchmark — ${meta.date}

- Command: \`${meta.command}\`${meta.npmScript ? ` (runs \`${meta.npmScript}\`)` : ''}; each server runs as \`node bench/http/server.mjs '<case JSON>'\`
- Node ${meta.node} (V8 ${meta.v8}), ${meta.platform}
- CPU: ${meta.cpu.model} × ${meta.cpu.cores}
- Date: ${meta.date}; ${meta.durationSeconds} s in all; load average (1/5/15 min) ${meta.loadAverage.before.join(' / ')} before, ${meta.loadAverage.after.join(' / ')} after (2 cores shared with other work: each run's 1-min load average is in the JSON)
- edgelimit ${meta.versions.edgelimit} at ${meta.git.head ?? 'unknown commit'}${dirtyText(meta.git.dirty)}; build hash ${meta.edgelimitBuild}; express ${meta.versions.express}, fastify ${meta.versions.fastify}, hono ${meta.versions.hono}, @hono/node-server ${meta.versions['@hono/node-server']}; load: ${method.tool === 'wrk' ? meta.versions.wrk : `autocannon ${meta.versions.autocannon}`}
${opts.quick ? '- **Quick run: indicative only.**\n' : ''}
**Target: with the adapter ≥ ${pct(TARGET)} of the requests per second without it (scenario \`admit\`): ${passed}/${total} PASS.**
${problems.length > 0 ? `\n**Problems:** ${problems.join('; ')}\n` : ''}
${sections}
Columns: requests/s without and with the adapter, pooled over every slice; **the median of the per-pair ratios (judged)**; the lowest and highest pair; the pooled ratio, overall and per round; the server process's CPU time per answered request (user + system, pooled) without → with, and the difference: the adapter's cost per request.

## Method

- A hello-world server (\`hello world\`, text/plain) per adapter, without and with edgelimit: ${Object.values(
    ADAPTERS,
  )
    .map((a) => `${a.label}: \`${a.api}\``)
    .join(
      '; ',
    )}. The fetch row compares the wrapped handler with the same bridge (\`node:http\` → \`Request\` → handler → \`Response\` → \`node:http\`) serving the bare handler.
- The **control** rows (scenario \`admit\`, not judged) measure the floor under each framework's row: the server without edgelimit against the same server setting, by hand, the two fields the adapter sends on every admitted response (\`RateLimit-Policy\` constant, \`RateLimit\` with a falling remaining count and the seconds left in the window), in the same place the adapter runs (the request handler for Node http; a middleware for Express and Hono — on @hono/node-server through \`c.env.outgoing\`, as \`honoRateLimit\` does; an \`onRequest\` hook for Fastify). What the framework itself charges for a middleware that sends the fields any adapter has to send.
- edgelimit: the built package (copied once at start), the memory store, default options (client address as key: SHA-256 of the peer address, draft-10 headers on every response). Scenario \`admit\`: ${SCENARIOS.admit}. Scenario \`deny\` (informational, no target): ${SCENARIOS.deny}; without the adapter both paths answer 200.
- **Paired slices.** For each case, a round starts two fresh server processes, without and with the adapter, both up at once${opts.pin ? ' (both on CPU 1, wrk on CPU 0)' : ''}; each is warmed by ${opts.warmup} s of the same load; then ${opts.slices} pairs of slices, each slice \`${method.toolCommand}\` from 127.0.0.1 against one of the two, the pair's order alternating (without first in even pairs). ${opts.repeats} round${opts.repeats === 1 ? '' : 's'}, the adapter order alternating between rounds. The machine's speed drifts by tens of percent from one second to the next on this shared VM (one server's 2 s slices measured 14–35 µs of CPU per request in a row); two runs minutes apart, as in earlier versions of this benchmark, compare two different machines, and back-to-back slices do not. The verdict is the median of the per-pair ratios, so one slice hit by a burst of load moves it little. Every slice is in the JSON with its 1-minute load average, socket errors, status counts (counted by the server) and server CPU time.
- Each slice is checked: no socket errors, only 200 and 429 answers, nothing denied in \`admit\` (nor ever without the adapter), 50% ± 2% denied in \`deny\`.
`
}

await main(process.argv.slice(2))
