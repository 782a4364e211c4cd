// What a benchmark result needs to be read later: machine, load, build, source revision and the
// command that ran it; and writing the result files. Shared by the bench/*.mjs scripts.

import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const RESULTS = path.join(ROOT, 'bench', 'results')

/** `git …` in ROOT, its output (trailing white space cut), or null when git fails. */
export function git(args) {
  try {
    return execFileSync('git', args, {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trimEnd() // not trim(): a `git status --porcelain` line may start with a significant space
  } catch {
    return null
  }
}

/** The revision measured and the uncommitted changes under `paths` (`git status --porcelain` lines). */
export function gitState(paths) {
  return {
    head: git(['rev-parse', 'HEAD']),
    dirty: (git(['status', '--porcelain', '--', ...paths]) ?? '').split('\n').filter(Boolean),
  }
}

/** " with uncommitted changes in `a`, `b`" for a report header, or '' when there are none. */
export function dirtyText(dirty) {
  return dirty.length > 0
    ? ` with uncommitted changes in ${dirty.map((d) => `\`${d.slice(3)}\``).join(', ')}`
    : ''
}

/** The installed version of a package (node_modules/<pkg>/package.json), or null. */
export function version(pkg) {
  try {
    return JSON.parse(readFileSync(path.join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version
  } catch {
    return null
  }
}

/** A short hash of the built library's JavaScript (names and contents): which build was measured. */
export function buildHash(dir = path.dirname(fileURLToPath(import.meta.resolve('edgelimit')))) {
  const hash = createHash('sha256')
  for (const file of readdirSync(dir, { recursive: true }).map(String).sort()) {
    if (!file.endsWith('.js')) continue
    hash.update(file)
    hash.update(readFileSync(path.join(dir, file)))
  }
  return hash.digest('hex').slice(0, 16)
}

/**
 * Copies the built package so that every case measures the same build, even if someone rebuilds
 * `packages/edgelimit/dist` while the benchmark runs: waits for the entries (`edgelimit` and the
 * given subpaths, e.g. `redis`) to exist, copies dist/ to a new temporary directory that the
 * caller removes (added to `track`, when given, as soon as it exists), and checks that the copy's
 * entries load (a build caught half-written is copied again, up to 5 times). `from`: another
 * dist directory (a patched build), whose entries are `<subpath>.js`. Returns
 * `{ dir, url, urls: { [subpath]: url }, hash, head }`, `head` the revision checked out when the
 * copy was made (a long run outlives later commits).
 */
export async function snapshotEdgelimit(subpaths = [], track = undefined, { from } = {}) {
  const dist =
    from === undefined ? path.dirname(fileURLToPath(import.meta.resolve('edgelimit'))) : path.resolve(from)
  const entry = path.join(dist, 'index.js')
  const entries = subpaths.map((s) =>
    from === undefined ? fileURLToPath(import.meta.resolve(`edgelimit/${s}`)) : path.join(dist, `${s}.js`),
  )
  for (let attempt = 1; ; attempt++) {
    for (let waited = 0; ![entry, ...entries].every((f) => existsSync(f)); waited += 500) {
      if (waited > 60_000) throw new Error(`${dist} is incomplete: run npm run build`)
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    await new Promise((resolve) => setTimeout(resolve, 1000)) // let a concurrent build finish
    const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-bench-'))
    track?.add(dir)
    cpSync(dist, dir, { recursive: true })
    const at = (file) => pathToFileURL(path.join(dir, path.relative(dist, file))).href
    const urls = [entry, ...entries].map(at)
    try {
      const check = `await Promise.all(${JSON.stringify(urls)}.map((u) => import(u)))`
      execFileSync(process.execPath, ['--input-type=module', '-e', check], { stdio: 'pipe' })
    } catch (error) {
      rmSync(dir, { recursive: true, force: true })
      track?.delete(dir)
      if (attempt === 5) throw new Error(`the build in ${dist} does not load: ${error.stderr}`)
      continue
    }
    return {
      dir,
      url: urls[0],
      urls: Object.fromEntries(subpaths.map((s, i) => [s, urls[i + 1]])),
      hash: buildHash(dir),
      head: git(['rev-parse', 'HEAD']),
    }
  }
}

/** How the benchmark was started: the npm script when run through npm, and the direct command. */
export function commandLine(script, argv) {
  const direct = ['node', script, ...argv].join(' ')
  const event = process.env.npm_lifecycle_event
  if (event === undefined) return { command: direct, direct }
  return { command: `npm run ${event}`, npmScript: process.env.npm_lifecycle_script ?? null, direct }
}

/** Whether `taskset` (util-linux) runs here: the benchmarks pin processes to CPUs with it. */
function hasTaskset() {
  try {
    execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** The median of a list of numbers; NaN for an empty one. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** The value after `name` in `argv` (`--only node` → `node`), or `fallback` when `name` is absent. */
export function flagValue(argv, name, fallback) {
  return argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback
}

/**
 * Whether a benchmark pins its processes to CPUs (so that none migrates onto another's CPU
 * mid-run): with 2 or more CPUs and taskset, unless `--no-pin` is in `argv`.
 */
export function pinning(argv) {
  return !argv.includes('--no-pin') && os.cpus().length >= 2 && hasTaskset()
}

/** `node <argv>` as spawn's [command, args], on CPU `cpu` alone (taskset), or anywhere when undefined. */
export function nodeOn(cpu, argv) {
  return cpu === undefined
    ? [process.execPath, argv]
    : ['taskset', ['-c', String(cpu), process.execPath, ...argv]]
}

/** Node, V8, platform, CPU and memory of this machine. */
export function machine() {
  const cpus = os.cpus()
  return {
    node: process.version,
    v8: process.versions.v8,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpu: { model: cpus[0]?.model ?? 'unknown', cores: cpus.length },
    totalMemoryBytes: os.totalmem(),
  }
}

const round2 = (l) => Number(l.toFixed(2))

/**
 * Load average (1/5/15 min, two decimals) before the run and now; with `maxOneMinute`, also the
 * highest 1-minute figure seen during the run (the current one included).
 */
export function loadAverage(before, maxOneMinute) {
  const after = os.loadavg()
  const load = { before: before.map(round2), after: after.map(round2) }
  if (maxOneMinute !== undefined) load.maxOneMinute = round2(Math.max(maxOneMinute, after[0]))
  return load
}

/**
 * The facts every result file starts with (in this order): date, command, machine, the `redis`
 * server when given, the build measured (`snapshotHash`, or the hash of `buildDir`), the source
 * revision (`snapshotHead`, the one the snapshot was copied at, or HEAD now) with uncommitted
 * changes under `dirtyPaths`, edgelimit's and `packages`' versions, the
 * duration since `started` and the load average (`loadAverage(loadBefore, maxLoad)`).
 */
export function runMeta({
  script,
  argv,
  started,
  loadBefore,
  maxLoad,
  dirtyPaths,
  buildDir,
  snapshotHash,
  snapshotHead,
  packages = [],
  redis,
}) {
  return {
    date: new Date().toISOString().slice(0, 10),
    ...commandLine(script, argv),
    ...machine(),
    ...(redis === undefined ? {} : { redis }),
    edgelimitBuild: snapshotHash ?? buildHash(buildDir),
    git: { ...gitState(dirtyPaths), ...(snapshotHead ? { head: snapshotHead } : {}) },
    versions: Object.fromEntries(['edgelimit', ...packages].map((p) => [p, version(p)])),
    durationSeconds: Math.round((Date.now() - started) / 1000),
    loadAverage: loadAverage(loadBefore, maxLoad),
  }
}

/** A table as aligned text (for the console) and as Markdown; `align[i]` is 'r' or 'l'. */
export function table(header, rows, align) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const cell = (v, i) => (align[i] === 'r' ? String(v).padStart(widths[i]) : String(v).padEnd(widths[i]))
  const text = [
    header.map(cell).join('  '),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map((r) => r.map(cell).join('  ')),
  ]
    .map((line) => line.trimEnd())
    .join('\n')
  return { text, md: mdTable(header, rows, align) }
}

/** A Markdown table; `align[i]` is 'r' or 'l'. */
export function mdTable(header, rows, align) {
  const sep = align.map((a) => (a === 'r' ? '---:' : ':---'))
  return [header, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n')
}

/** Writes `<base>.json` (pretty-printed, with a final newline) and `<base>.md` under bench/results. */
export function writeResults(base, json, md) {
  mkdirSync(RESULTS, { recursive: true })
  const file = path.join(RESULTS, base)
  writeFileSync(`${file}.json`, `${JSON.stringify(json, null, 2)}\n`)
  writeFileSync(`${file}.md`, md)
  return file
}
