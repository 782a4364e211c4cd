// Decision latency and throughput of edgelimit's Durable Object store in workerd (miniflare),
// beside a bare Durable Object counter: the ceiling for any durable per-key limiter on Workers.
//
//   npm run bench:edge                        (runs node bench/edge.mjs)
//   node bench/edge.mjs [--quick] [--no-write]
//
// One workerd process runs bench/edge/worker.ts (bundled from the library's sources by esbuild),
// with two SQLite-backed Durable Object classes: EdgelimitDurableObject and BareCounter. Storage is
// on tmpfs (/dev/shm): every write is made durable before an object answers, and on this machine
// an fsync to disk would be measured instead of the runtime.
//
// Two measurements per case, in REPEATS rounds over all cases (alternating order):
// - latency: sequential requests from Node over loopback HTTP, one decision each, timed with
//   hrtime (workerd's clock only advances on I/O, in whole ms, so per-decision timing inside the
//   Worker is not possible); a `noop` case (no Durable Object) gives the HTTP hop alone;
// - throughput: one request runs a batch of decisions inside the Worker, CONCURRENCY in flight,
//   timed inside workerd (whole ms over ≥ 100 ms batches), and sequentially for the mean latency
//   without the HTTP hop.
//
// Writes bench/results/edge-<YYYY-MM-DD>.json and .md (UTC date).

import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { build } from 'esbuild'
import { Miniflare } from 'miniflare'
import { dirtyText, gitState, loadAverage, ROOT, version, writeResults } from './lib/machine.mjs'

const argv = process.argv.slice(2)
const opts = { quick: argv.includes('--quick'), write: !argv.includes('--no-write') }

const KEYS = 1000
const REPEATS = 3
const CONCURRENCY = 32
const LATENCY_REQUESTS = opts.quick ? 200 : 1000
const BATCH = opts.quick ? 1000 : 5000
const SEQUENTIAL = opts.quick ? 300 : 1000

/** The cases: how a decision is made, and over how many keys. */
const CASES = [
  { id: 'noop', label: 'HTTP hop only (no Durable Object)', mode: 'noop', keys: 1 },
  { id: 'bare-hot', label: 'bare DO counter (ceiling), hot key', mode: 'bare', keys: 1 },
  { id: 'bare-1000', label: 'bare DO counter (ceiling), 1,000 keys', mode: 'bare', keys: KEYS },
  { id: 'edgelimit-hot', label: 'edgelimit DO store, hot key', mode: 'edgelimit', keys: 1 },
  {
    id: 'edgelimit-1000',
    label: 'edgelimit DO store, 1,000 keys (object per key)',
    mode: 'edgelimit',
    keys: KEYS,
  },
  {
    id: 'edgelimit-1000-sharded',
    label: 'edgelimit DO store, 1,000 keys (16 shards)',
    mode: 'edgelimit-sharded',
    keys: KEYS,
  },
]

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}

async function start() {
  const bundled = await build({
    entryPoints: [path.join(ROOT, 'bench', 'edge', 'worker.ts')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    external: ['cloudflare:workers'],
    loader: { '.lua': 'text' },
    write: false,
    logLevel: 'silent',
  })
  const dir = mkdtempSync(path.join(existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'edgelimit-bench-'))
  const mf = new Miniflare({
    modules: true,
    script: bundled.outputFiles[0].text,
    compatibilityDate: '2025-09-01',
    durableObjects: {
      LIMITER: { className: 'EdgelimitDurableObject', useSQLite: true },
      COUNTER: { className: 'BareCounter', useSQLite: true },
    },
    durableObjectsPersist: dir,
  })
  const base = (await mf.ready).href.replace(/\/$/, '')
  return {
    base,
    async stop() {
      await mf.dispose()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

async function get(url) {
  const res = await fetch(url)
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`)
  return res
}

/** Sequential single-decision requests from Node: per-request latency in ms (fractional). */
async function latency(base, c, run, from) {
  const samples = []
  for (let i = 0; i < LATENCY_REQUESTS; i++) {
    const t = process.hrtime.bigint()
    const res = await get(`${base}/one?mode=${c.mode}&keys=${c.keys}&run=${run}&i=${from + i}`)
    if ((await res.text()) !== '1') throw new Error(`${c.id}: a decision was denied`)
    samples.push(Number(process.hrtime.bigint() - t) / 1e6)
  }
  return samples
}

/** One batch inside the Worker: `{ ms, admitted }`. */
async function batch(base, c, run, from, n, concurrency) {
  const url = `${base}/batch?mode=${c.mode}&keys=${c.keys}&run=${run}&from=${from}&n=${n}&concurrency=${concurrency}`
  const result = await (await get(url)).json()
  if (result.admitted !== n) throw new Error(`${c.id}: ${n - result.admitted} decisions denied`)
  return result
}

async function main() {
  const started = Date.now()
  const loadBefore = os.loadavg()
  const worker = await start()
  const run = `r${Date.now().toString(36)}`
  const results = Object.fromEntries(
    CASES.map((c) => [c.id, { latencyMs: [], throughput: [], sequential: [] }]),
  )
  try {
    // Warm-up: every key's object created and every code path compiled before anything is timed.
    for (const c of CASES) {
      await batch(worker.base, c, run, 0, Math.max(KEYS, 500), 16)
      await latency(worker.base, c, run, 0)
    }
    let offset = KEYS
    for (let round = 0; round < REPEATS; round++) {
      const order = round % 2 === 0 ? CASES : [...CASES].reverse()
      for (const c of order) {
        const r = results[c.id]
        r.latencyMs.push(...(await latency(worker.base, c, run, offset)))
        if (c.mode !== 'noop') {
          // No I/O, no time passes in workerd: the hop alone has no in-Worker figures.
          const parallel = await batch(worker.base, c, run, offset, BATCH, CONCURRENCY)
          r.throughput.push({ decisions: BATCH, ms: parallel.ms, perSecond: (BATCH / parallel.ms) * 1000 })
          const sequential = await batch(worker.base, c, run, offset, SEQUENTIAL, 1)
          r.sequential.push({ decisions: SEQUENTIAL, ms: sequential.ms, meanMs: sequential.ms / SEQUENTIAL })
        }
        offset += BATCH
        const last = r.throughput.at(-1)
        process.stdout.write(
          `round ${round + 1}/${REPEATS} ${c.id}: p50 ${quantile(
            [...r.latencyMs].sort((a, b) => a - b),
            0.5,
          ).toFixed(2)} ms${last ? `, ${Math.round(last.perSecond)}/s` : ''}\n`,
        )
      }
    }
  } finally {
    await worker.stop()
  }

  const summary = CASES.map((c) => {
    const r = results[c.id]
    const sorted = [...r.latencyMs].sort((a, b) => a - b)
    return {
      id: c.id,
      label: c.label,
      keys: c.keys,
      latencyMs: {
        samples: sorted.length,
        p50: quantile(sorted, 0.5),
        p99: quantile(sorted, 0.99),
        mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
      },
      bestDecisionsPerSecond:
        r.throughput.length > 0 ? Math.max(...r.throughput.map((t) => t.perSecond)) : null,
      inWorkerMeanLatencyMs: r.sequential.length > 0 ? Math.min(...r.sequential.map((s) => s.meanMs)) : null,
      runs: { throughput: r.throughput, sequential: r.sequential },
    }
  })
  const byId = Object.fromEntries(summary.map((s) => [s.id, s]))
  const ceiling = (id) =>
    id.startsWith('edgelimit') ? byId[id.endsWith('hot') ? 'bare-hot' : 'bare-1000'] : undefined

  const cpus = os.cpus()
  const date = new Date().toISOString().slice(0, 10)
  const { head, dirty } = gitState([])
  const meta = {
    date,
    command: process.env.npm_lifecycle_event
      ? `npm run ${process.env.npm_lifecycle_event}`
      : `node bench/edge.mjs ${argv.join(' ')}`.trim(),
    node: process.version,
    platform: `${os.type().toLowerCase()} ${os.release()} ${os.arch()}`,
    cpu: { model: cpus[0]?.model.trim() ?? 'unknown', cores: cpus.length },
    durationSeconds: Math.round((Date.now() - started) / 1000),
    loadAverage: loadAverage(loadBefore),
    versions: {
      edgelimit: version('edgelimit'),
      miniflare: version('miniflare'),
      workerd: version('workerd'),
    },
    git: { head, dirty },
    parameters: {
      keys: KEYS,
      repeats: REPEATS,
      concurrency: CONCURRENCY,
      latencyRequests: LATENCY_REQUESTS,
      batch: BATCH,
      sequential: SEQUENTIAL,
      quick: opts.quick,
    },
  }

  const ms = (x) => (x === null ? '—' : x < 1 ? `${(x * 1000).toFixed(0)} µs` : `${x.toFixed(2)} ms`)
  const rate = (x) => (x === null ? '—' : `${Math.round(x).toLocaleString('en-US')}/s`)
  const rows = summary.map((s) => {
    const top = ceiling(s.id)
    const share = top ? `${Math.round((s.bestDecisionsPerSecond / top.bestDecisionsPerSecond) * 100)}%` : '—'
    return `| ${s.label} | ${ms(s.latencyMs.p50)} | ${ms(s.latencyMs.p99)} | ${ms(s.inWorkerMeanLatencyMs)} | ${rate(s.bestDecisionsPerSecond)} | ${share} |`
  })
  const table = [
    '| case | p50 latency (request) | p99 latency (request) | mean latency in Worker | decisions/s in Worker | of ceiling |',
    '| :--- | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n')
  console.log(`\n${table}`)

  const md = `# Edge benchmark: Durable Object store in workerd — ${date}

- Command: \`${meta.command}\`; one workerd (miniflare ${meta.versions.miniflare}, workerd ${meta.versions.workerd}) running \`bench/edge/worker.ts\` bundled from source by esbuild
- Node ${meta.node}, ${meta.platform}
- CPU: ${meta.cpu.model} × ${meta.cpu.cores}
- Date: ${date}; ${meta.durationSeconds} s in all; load average (1/5/15 min) ${meta.loadAverage.before.join(' / ')} before, ${meta.loadAverage.after.join(' / ')} after (2 cores shared by Node, workerd and other work: treat differences under ~15% as noise)
- edgelimit ${meta.versions.edgelimit} at ${meta.git.head ?? 'unknown commit'}${dirtyText(dirty)}
${opts.quick ? '- **Quick run: indicative only.**\n' : ''}
## Decision latency and throughput

${table}

- **p50 / p99 latency (request)**: ${(LATENCY_REQUESTS * REPEATS).toLocaleString('en-US')} sequential requests per case from Node over loopback HTTP into workerd, one decision each (hrtime). Includes the HTTP hop; the first row is the hop alone.
- **mean latency in Worker**: ${SEQUENTIAL.toLocaleString('en-US')} sequential decisions inside the Worker, timed by workerd's clock (best of ${REPEATS}): no HTTP hop. workerd's clock advances only on I/O and in whole ms, so only means can be timed inside it.
- **decisions/s in Worker**: ${BATCH.toLocaleString('en-US')} decisions in one request, ${CONCURRENCY} in flight, timed inside workerd (best of ${REPEATS}).
- **of ceiling**: edgelimit's decisions/s as a share of the bare counter's for the same keys.

## Method

- Every decision is an admission that writes state: edgelimit runs one sliding-window rule (\`limit: 5e8, window: '1h'\`) through \`createLimiter\` (\`timeout: '1s'\`, other options default) and \`durableObjectStore()\`; each decision is one RPC to the key's object, which decides with the core and writes the key's state through \`ctx.storage.sql\` in the same turn. The bare counter (\`BareCounter\`) is one RPC to the key's object, which adds 1 to an in-memory count and writes it through \`ctx.storage.sql\`: the same round trip and durable write, no rate limiting.
- Hot key: every decision for one key (one object; decisions on it are serialized). 1,000 keys: keys visited round-robin, one object per key (and, for edgelimit, 16 shards by a stable hash); every object is created in a warm-up before timing.
- Storage on tmpfs; SQLite-backed objects; compatibility date 2025-09-01. Cases run in ${REPEATS} rounds, alternating order, after a warm-up of every case. All runs are in the JSON.
`

  if (opts.write) {
    writeResults(`edge-${date}`, { meta, results: summary }, md)
    console.log(`\nwrote bench/results/edge-${date}.json and .md`)
  }
}

await main()
