// Throughput and memory of `edgelimit replay` on a generated 1,000,000-line access log.
//
//   node bench/replay.mjs [--lines N] [--repeats 3] [--no-write]      (after npm run build)
//
// The replay engine is TypeScript in packages/gateway: it is bundled once (esbuild, the library
// and other dependencies external) into a temporary directory. The logs are generated once into
// that directory (packages/gateway/test/replay/generate-log.ts: 50,000 clients as skewed as in
// the real sample log — Zipf, exponent 0.7 — written up to 20 s out of time order; and a uniform
// variant, the worst case for caches). Every run is a fresh child
// process (`node --expose-gc bench/replay.mjs --child <case>`), one at a time, in rounds over all
// cases; the best run counts. A run reads the file from disk and decides every line against the
// policy, exactly as `edgelimit replay` does (without printing), and samples the heap after a
// forced GC every 262,144 lines.
//
// Target (issue 8): ≥ 500,000 lines/s with flat memory on the Combined Log Format log.
//
// Writes bench/results/replay-<YYYY-MM-DD>.json and .md (UTC date).

import { execFileSync } from 'node:child_process'
import {
  cpSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { pathToFileURL } from 'node:url'
import { createGzip } from 'node:zlib'
import { environment, headerLines, mdTable, RESULTS, ROOT } from './accuracy/env.mjs'

const SELF = path.join(ROOT, 'bench', 'replay.mjs')
const TARGET = 500_000

const POLICIES = {
  'one rule': [{ name: 'per-ip', algorithm: 'sliding-window', limit: 100, window: '1m' }],
  'three rules': [
    { name: 'per-ip', algorithm: 'sliding-window', limit: 100, window: '1m' },
    { name: 'burst', algorithm: 'token-bucket', capacity: 20, refillRate: 5 },
    {
      name: 'login',
      match: { path: '/login', methods: ['POST'] },
      algorithm: 'fixed-window',
      limit: 5,
      window: '1m',
    },
  ],
}

const CASES = [
  { id: 'clf/one rule', file: 'clf', policy: 'one rule', target: true },
  { id: 'clf/three rules', file: 'clf', policy: 'three rules', target: true },
  { id: 'clf.gz/three rules', file: 'clf.gz', policy: 'three rules' },
  { id: 'json/one rule', file: 'json', policy: 'one rule' },
  { id: 'clf, uniform keys/one rule', file: 'clf-uniform', policy: 'one rule' },
]

async function child(spec) {
  const { replayLog, policyFromRules } = await import(spec.moduleUrl)
  const heap = []
  const rules = policyFromRules(POLICIES[spec.policy])
  globalThis.gc()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let gcMs = 0
  const r = await replayLog({
    inputs: [spec.file],
    rules,
    onProgress: ({ lines }) => {
      if (lines % 262_144 !== 0) return
      const g = performance.now()
      globalThis.gc()
      heap.push([lines, process.memoryUsage().heapUsed])
      gcMs += performance.now() - g
    },
  })
  // The forced collections are the measurement's, not the replay's: their time is taken out.
  const ms = performance.now() - t0 - gcMs
  const cpu = process.cpuUsage(cpu0)
  return {
    lines: r.lines,
    requests: r.requests,
    malformed: r.malformed.count,
    late: r.late.count,
    denied: r.rules.map((x) => x.denied),
    ms,
    linesPerSec: Math.round((r.lines / ms) * 1000),
    cpuMs: (cpu.user + cpu.system) / 1000,
    heap,
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
  }
}

function bundle(dir) {
  const entry = path.join(dir, 'entry.ts')
  writeFileSync(
    entry,
    `export { replayLog, policyFromRules } from ${JSON.stringify(path.join(ROOT, 'packages/gateway/src/replay/index.ts'))}\nexport { accessLog } from ${JSON.stringify(path.join(ROOT, 'packages/gateway/test/replay/generate-log.ts'))}\n`,
  )
  const out = path.join(dir, 'replay.mjs')
  const esbuild = path.join(ROOT, 'node_modules', '.bin', 'esbuild')
  execFileSync(
    esbuild,
    [
      entry,
      '--bundle',
      '--platform=node',
      '--format=esm',
      `--outfile=${out}`,
      '--external:edgelimit',
      '--external:yaml',
      '--external:uplot',
      '--log-level=warning',
    ],
    { cwd: ROOT, stdio: 'inherit' },
  )
  // The bundle's externals: a copy of the built library (every run measures the same build, even
  // if packages/edgelimit/dist is rebuilt meanwhile), the other dependencies linked.
  const modules = path.join(dir, 'node_modules')
  mkdirSync(modules)
  const lib = path.join(ROOT, 'packages', 'edgelimit')
  cpSync(path.join(lib, 'dist'), path.join(modules, 'edgelimit', 'dist'), { recursive: true })
  cpSync(path.join(lib, 'package.json'), path.join(modules, 'edgelimit', 'package.json'))
  for (const dep of ['yaml', 'uplot'])
    symlinkSync(path.join(ROOT, 'node_modules', dep), path.join(modules, dep))
  return pathToFileURL(out).href
}

/** Waits for a complete build of the library (a concurrent `npm run build` may be under way). */
async function waitForBuild() {
  const entry = path.join(ROOT, 'packages', 'edgelimit', 'dist', 'index.js')
  for (let waited = 0; !existsSync(entry); waited += 500) {
    if (waited > 60_000) throw new Error(`${entry} is missing: run npm run build`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  await new Promise((resolve) => setTimeout(resolve, 1000))
}

async function parent(argv) {
  const lines = argv.includes('--lines') ? Number(argv[argv.indexOf('--lines') + 1]) : 1_000_000
  const repeats = argv.includes('--repeats') ? Number(argv[argv.indexOf('--repeats') + 1]) : 3
  const started = Date.now()
  const loadBefore = os.loadavg()
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-bench-replay-'))
  try {
    await waitForBuild()
    const moduleUrl = bundle(dir)
    const { accessLog } = await import(moduleUrl)
    const files = {
      clf: path.join(dir, 'access-clf.log'),
      json: path.join(dir, 'access-json.log'),
      'clf.gz': path.join(dir, 'access-clf.log.gz'),
      'clf-uniform': path.join(dir, 'access-clf-uniform.log'),
    }
    await pipeline(accessLog({ lines }), createWriteStream(files.clf))
    await pipeline(accessLog({ lines, format: 'json' }), createWriteStream(files.json))
    await pipeline(accessLog({ lines }), createGzip(), createWriteStream(files['clf.gz']))
    await pipeline(accessLog({ lines, distribution: 'uniform' }), createWriteStream(files['clf-uniform']))
    const runs = []
    for (let round = 0; round < repeats; round++)
      runs.push(...(round % 2 === 0 ? CASES : [...CASES].reverse()))
    const byId = new Map()
    for (const [i, c] of runs.entries()) {
      const file = files[c.file]
      const load = os.loadavg()[0]
      const out = JSON.parse(
        execFileSync(
          process.execPath,
          ['--expose-gc', SELF, '--child', JSON.stringify({ ...c, file, moduleUrl })],
          {
            encoding: 'utf8',
            maxBuffer: 1 << 24,
          },
        ),
      )
      process.stderr.write(
        `[${String(i + 1).padStart(2)}/${runs.length}] ${c.id.padEnd(20)} ${out.linesPerSec.toLocaleString('en-US')} lines/s (cpu ${Math.round(out.cpuMs)} ms), load ${load.toFixed(2)}\n`,
      )
      const r = byId.get(c.id) ?? { ...c, fileBytes: statSync(file).size, runs: [] }
      r.runs.push({ ...out, loadAverage: Number(load.toFixed(2)) })
      byId.set(c.id, r)
    }
    const results = CASES.map((c) => {
      const r = byId.get(c.id)
      const best = r.runs.reduce((a, b) => (b.linesPerSec > a.linesPerSec ? b : a))
      return { ...r, best }
    })
    report(results, {
      lines,
      repeats,
      argv,
      started,
      loadBefore,
      buildDir: path.join(dir, 'node_modules', 'edgelimit', 'dist'),
    })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function report(results, { lines, repeats, argv, started, loadBefore }) {
  const meta = environment({
    script: 'bench/replay.mjs',
    argv,
    started,
    loadBefore,
    dirtyPaths: ['packages/gateway/src/replay', 'packages/edgelimit'],
  })
  const mib = (b) => (b / 2 ** 20).toFixed(1)
  const heapText = (h) => h.map(([, b]) => mib(b)).join(' → ')
  const growth = (h) => (h.length < 2 ? 0 : h[h.length - 1][1] - h[0][1])
  const rows = results.map((r) => [
    r.id,
    `${mib(r.fileBytes)} MiB`,
    r.best.linesPerSec.toLocaleString('en-US'),
    Math.round((r.best.lines / r.best.cpuMs) * 1000).toLocaleString('en-US'),
    r.runs.map((x) => x.linesPerSec.toLocaleString('en-US')).join(', '),
    heapText(r.best.heap),
    `${mib(growth(r.best.heap))} MiB`,
    `${mib(r.best.maxRssBytes)} MiB`,
    r.best.denied.join(' / '),
  ])
  const verdicts = results
    .filter((r) => r.target)
    .map(
      (r) =>
        `- ${r.id}: ${r.best.linesPerSec.toLocaleString('en-US')} lines/s — ${r.best.linesPerSec >= TARGET ? 'PASS' : 'FAIL'} (target ≥ ${TARGET.toLocaleString('en-US')}); heap growth ${mib(growth(r.best.heap))} MiB from ${(r.best.heap[0]?.[0] ?? 0).toLocaleString('en-US')} to ${(r.best.heap.at(-1)?.[0] ?? 0).toLocaleString('en-US')} lines`,
    )
  const md = `# Replay benchmark — ${meta.date}

${headerLines(meta).join('\n')}
- Log: ${lines.toLocaleString('en-US')} generated lines per case, read from a file: 50,000 clients, as skewed as in the real sample log (Zipf, exponent 0.7: the top 1 % of clients send 23 % of requests, the top 10 % half; the sample: 25 % and 55 %), 400 requests/s, lines written up to 20 s out of time order. "uniform keys": every client alike (2 % from 5 hot ones), the worst case for caches.

## Lines per second (best of ${repeats} runs, each in a fresh process)

${mdTable(['case', 'file', 'lines/s (wall)', 'lines per CPU-second', 'all runs', 'heap after GC every 262,144 lines (MiB)', 'heap growth', 'max RSS', 'would block per rule'], rows, ['l', 'r', 'r', 'r', 'l', 'l', 'r', 'r', 'r'])}

## Target: ≥ ${TARGET.toLocaleString('en-US')} lines/s with flat memory

${verdicts.join('\n')}

## Method

- Each run: a fresh \`node --expose-gc\` child imports the bundled engine, builds the policy, calls \`gc()\`, then \`replayLog({ inputs: [file], rules })\` with the defaults of \`edgelimit replay\` (shadow mode, 2-minute reorder window, 1,000,000 keys per rule); lines/s is lines ÷ wall time, with the forced collections of the heap samples taken out. "lines per CPU-second" divides by the process's user + system CPU time (it includes the collector's threads) and is less sensitive to other load on the machine.
- Policies: one rule = \`sliding-window 100 per 1m by ip\`; three rules = that, \`token-bucket capacity 20 refill 5/s by ip\`, and \`fixed-window 5 per 1m\` on \`POST /login\`.
- Memory: heapUsed after a forced GC every 262,144 lines. The state held is bounded by the keys (50,000 clients) and the reorder window, not by the number of lines: after the first samples it stays flat. packages/gateway/test/replay/memory.test.ts asserts the same on every test run.
- gzip case: the same log gzipped (decompressed with node:zlib while reading). JSON case: the same requests as JSON lines (\`time\`, \`remote_addr\`, \`request\`, \`status\`, …), parsed with \`JSON.parse\`.
`
  process.stdout.write(`${md}\n`)
  if (!argv.includes('--no-write')) {
    mkdirSync(RESULTS, { recursive: true })
    const base = path.join(RESULTS, `replay-${meta.date}`)
    writeFileSync(
      `${base}.json`,
      `${JSON.stringify({ benchmark: 'replay', ...meta, lines, repeats, target: TARGET, policies: POLICIES, results }, null, 2)}\n`,
    )
    writeFileSync(`${base}.md`, md)
    process.stderr.write(`wrote ${base}.json and .md\n`)
  }
}

const argv = process.argv.slice(2)
if (argv[0] === '--child') {
  if (typeof globalThis.gc !== 'function') throw new Error('run the child with --expose-gc')
  process.stdout.write(`${JSON.stringify(await child(JSON.parse(argv[1])))}\n`)
  process.exit(0)
} else {
  await parent(argv)
}
