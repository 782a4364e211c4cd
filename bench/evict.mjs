// Cost of a new key in the library's bounded Maps once they are full: `remember` (the address,
// partition, HMAC-key, denial and rule-set caches) and the approximate counter's eviction.
//
//   node bench/evict.mjs [--ref <git revision>] [--keys 10000,100000] [--no-write]
//
// Compiles packages/edgelimit/src/remember.ts and src/resilience/approximate.ts as they are in the
// work tree, or at --ref (e.g. `--ref main` for the figures before a change), fills each Map to its
// bound, then times new keys (as many again, at least 200,000, after a warm-up of a quarter as many): µs per new key.
// No build needed. Writes bench/results/evict-<YYYY-MM-DD>.json and .md (UTC date).

import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { transform } from 'esbuild'
import { flagValue, gitState, machine, ROOT, table, writeResults } from './lib/machine.mjs'

const argv = process.argv.slice(2)
const ref = flagValue(argv, '--ref', undefined)
const sizes = flagValue(argv, '--keys', '10000,100000').split(',').map(Number)
const SRC = 'packages/edgelimit/src'

/** A source file's module (type-only imports are erased, so each file stands alone). */
async function load(file) {
  const ts =
    ref === undefined
      ? readFileSync(path.join(ROOT, SRC, file), 'utf8')
      : execFileSync('git', ['show', `${ref}:${SRC}/${file}`], { cwd: ROOT, encoding: 'utf8' })
  const { code } = await transform(ts, { loader: 'ts', format: 'esm' })
  return import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`)
}

const { remember } = await load('remember.ts')
const { createApproximate } = await load('resilience/approximate.ts')

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

function rememberCase(max) {
  const map = new Map()
  for (let i = 0; i < max; i++) remember(map, `fill${i}`, i, max)
  return perKey(Math.max(max, TIMED), (key) => remember(map, key, 0, max))
}

async function approximateCase(maxKeys) {
  const verdict = { allowed: true, remaining: 100, resetAfterMs: 60_000, retryAfterMs: 0, delayMs: 0 }
  const answer = { verdicts: [verdict], source: 'store' }
  const counter = createApproximate({ sync: async () => [verdict], rules: 1, intervalMs: 60_000 }, maxKeys)
  const call = async () => answer
  for (let i = 0; i < maxKeys; i++) await counter.decide(`fill${i}`, 1, 0, 0, call)
  return perKey(Math.max(maxKeys, TIMED), (key) => counter.decide(key, 0, 0, 0, call))
}

const rows = []
for (const n of sizes) {
  rows.push({ map: 'remember', keys: n, usPerNewKey: await rememberCase(n) })
  rows.push({ map: 'approximate', keys: n, usPerNewKey: await approximateCase(n) })
}
const label = ref ?? 'work tree'
const t = table(
  ['Map', 'bound (keys)', `µs per new key (${label})`],
  rows.map((r) => [r.map, r.keys.toLocaleString('en-US'), r.usPerNewKey.toFixed(2)]),
  ['l', 'r', 'r'],
)
console.log(t.text)
if (!argv.includes('--no-write')) {
  const date = new Date().toISOString().slice(0, 10)
  const json = {
    date,
    command: ['node', 'bench/evict.mjs', ...argv].join(' '),
    ...machine(),
    git: gitState([SRC]),
    ref: label,
    rows,
  }
  const file = writeResults(
    `evict-${date}`,
    json,
    `# Eviction cost per new key, ${date} (${label})\n\n${t.md}\n`,
  )
  console.log(`\nwrote ${path.relative(ROOT, file)}.{json,md}`)
}
