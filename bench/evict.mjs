// Cost of a new key in the library's bounded Maps once they are full: `remember` (the address,
// partition, HMAC-key, denial and rule-set caches) and the approximate counter's eviction.
//
//   node bench/evict.mjs [--ref <git revision>] [--keys 10000,100000] [--no-write]
//
// Bundles packages/edgelimit/src/remember.ts and src/resilience/approximate.ts (with what they
// import) as they are in the work tree and, with --ref (e.g. `--ref 62c7db0`, before batched
// eviction), as they are at that revision, and measures both in the same run: fills each Map to
// its bound, then times new keys (as many again, at least 200,000, after a warm-up of a quarter as
// many): µs per new key. No build needed. Writes bench/results/evict-<YYYY-MM-DD>.json and .md (UTC date).

import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { build } from 'esbuild'
import { flagValue, gitState, machine, ROOT, table, writeResults } from './lib/machine.mjs'

const argv = process.argv.slice(2)
const ref = flagValue(argv, '--ref', undefined)
const sizes = flagValue(argv, '--keys', '10000,100000').split(',').map(Number)
const SRC = 'packages/edgelimit/src'

/** A source file's module at `rev` (undefined: the work tree), bundled with its imports. */
async function load(file, rev) {
  const read = (rel) =>
    rev === undefined
      ? readFileSync(path.join(ROOT, SRC, rel), 'utf8')
      : execFileSync('git', ['show', `${rev}:${SRC}/${rel}`], { cwd: ROOT, encoding: 'utf8' })
  const source = {
    name: 'source',
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => ({
        path: path.posix.normalize(
          path.posix.join(path.posix.dirname(args.importer || file), args.path.replace(/\.js$/, '.ts')),
        ),
        namespace: 'src',
      }))
      b.onLoad({ filter: /.*/, namespace: 'src' }, (args) => ({ contents: read(args.path), loader: 'ts' }))
    },
  }
  const out = await build({
    stdin: { contents: `export * from './${file}'`, loader: 'ts', resolveDir: '.' },
    bundle: true,
    format: 'esm',
    write: false,
    plugins: [source],
    logLevel: 'silent',
  })
  return import(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0].text).toString('base64')}`)
}

const versions = [...(ref === undefined ? [] : [ref]), undefined]
const loaded = await Promise.all(
  versions.map(async (rev) => ({
    label: rev ?? 'work tree',
    remember: (await load('remember.ts', rev)).remember,
    createApproximate: (await load('resilience/approximate.ts', rev)).createApproximate,
  })),
)

/** New keys timed per case (at least the bound), after a warm-up of a quarter as many. */
const TIMED = 200_000

/** µs per `add(key)` (awaited when it returns a promise) over `n` new keys made beforehand. */
async function perKey(n, add) {
  const keys = Array.from({ length: n + (n >> 2) }, (_, i) => `new${i}`)
  for (let i = 0; i < n >> 2; i++) await add(keys[n + i])
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    const pending = add(keys[i])
    if (pending !== undefined) await pending
  }
  return Number(process.hrtime.bigint() - start) / 1000 / n
}

function rememberCase(remember, max) {
  const map = new Map()
  for (let i = 0; i < max; i++) remember(map, `fill${i}`, i, max)
  return perKey(Math.max(max, TIMED), (key) => remember(map, key, 0, max))
}

async function approximateCase(createApproximate, maxKeys) {
  const verdict = { allowed: true, remaining: 100, resetAfterMs: 60_000, retryAfterMs: 0, delayMs: 0 }
  const answer = { verdicts: [verdict], source: 'store' }
  const counter = createApproximate(
    { sync: async () => [verdict], rules: 1, intervalMs: 60_000, timed: true },
    maxKeys,
  )
  const call = async () => answer
  for (let i = 0; i < maxKeys; i++) await counter.decide(`fill${i}`, 1, 0, 0, call)
  return perKey(Math.max(maxKeys, TIMED), (key) => counter.decide(key, 0, 0, 0, call))
}

const rows = []
for (const n of sizes) {
  for (const map of ['remember', 'approximate']) {
    const row = { map, keys: n, usPerNewKey: {} }
    for (const v of loaded) {
      row.usPerNewKey[v.label] =
        map === 'remember' ? await rememberCase(v.remember, n) : await approximateCase(v.createApproximate, n)
    }
    rows.push(row)
  }
}
const labels = loaded.map((v) => v.label)
const t = table(
  ['Map', 'bound (keys)', ...labels.map((l) => `µs per new key (${l})`)],
  rows.map((r) => [r.map, r.keys.toLocaleString('en-US'), ...labels.map((l) => r.usPerNewKey[l].toFixed(2))]),
  ['l', 'r', ...labels.map(() => 'r')],
)
console.log(t.text)
if (!argv.includes('--no-write')) {
  const date = new Date().toISOString().slice(0, 10)
  const json = {
    date,
    command: ['node', 'bench/evict.mjs', ...argv].join(' '),
    ...machine(),
    git: gitState([SRC]),
    versions: labels,
    rows,
  }
  const file = writeResults(
    `evict-${date}`,
    json,
    `# Eviction cost per new key, ${date}\n\nCommand: \`${json.command}\`\n\n${t.md}\n`,
  )
  console.log(`\nwrote ${path.relative(ROOT, file)}.{json,md}`)
}
