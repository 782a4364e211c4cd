// Bundle budget for edge runtimes: what an edge app ships, bundled as Workers/Deno/Vercel Edge
// bundlers do (esbuild --bundle --platform=neutral --minify, ESM), measured minified and gzipped
// (level 9), and checked for anything that is not runtime-neutral (`node:` imports, `require`,
// Buffer, process).
//
//   npm run size            prints the table; exits 1 when a budget is exceeded
//
// Entries are bundled from the library's TypeScript sources, as they are built into dist/.

import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const SRC = path.join(ROOT, 'packages', 'edgelimit', 'src')
const KB = 1024

const ALGORITHMS = 'fixedWindow, gcra, leakyBucket, slidingLog, slidingWindow, tokenBucket'

/** The measured entries: name → source of the entry module (imports resolved against src/). */
export const ENTRIES = {
  // The four parts named by the budget: the core (src/core), the memory store, the header fields
  // and the fetch adapter (with the HTTP layer it runs on: identity, problem+json).
  'core + memory store + headers + fetch adapter': `
    export { compile, step } from './core/index.ts'
    export { memoryStore } from './stores/memory.ts'
    export { rateLimitHeaders } from './http/headers.ts'
    export { withRateLimit } from './adapters/fetch.ts'`,
  // What a Worker, Deno or Vercel Edge app ships: the above plus createLimiter (options
  // validation, failure policy, denial cache) and every algorithm's options.
  'edge app: createLimiter + every algorithm + memory store + fetch adapter': `
    export { createLimiter, memoryStore, ${ALGORITHMS} } from './index.ts'
    export { withRateLimit } from './adapters/fetch.ts'`,
  // The same app on Cloudflare with the Durable Object store, its class and the Workers glue.
  'edge app + Durable Object store (edgelimit/cloudflare)': `
    export { createLimiter, memoryStore, ${ALGORITHMS} } from './index.ts'
    export { withRateLimit } from './adapters/fetch.ts'
    export { EdgelimitDurableObject, cloudflareIdentity, cloudflarePeer, durableObjectStore, withWaitUntil } from './cloudflare.ts'`,
}

/** Budgets in bytes (min+gzip): issue 6's two, and a ceiling that keeps the whole app from growing. */
export const BUDGETS = {
  core: 12 * KB,
  durableObjectStore: 4 * KB,
  appCeiling: 16 * KB,
}

/** Bundles one entry; returns its minified code. */
async function bundle(contents) {
  const result = await build({
    stdin: { contents, resolveDir: SRC, sourcefile: 'entry.ts', loader: 'ts' },
    bundle: true,
    platform: 'neutral',
    format: 'esm',
    minify: true,
    target: 'es2022',
    external: ['cloudflare:workers'],
    loader: { '.lua': 'text' },
    write: false,
    logLevel: 'silent',
  })
  return result.outputFiles[0].text
}

/** What in a bundle is not runtime-neutral, by kind (empty when clean). */
export function nodeisms(code) {
  const found = {}
  const patterns = {
    'node: import': /["']node:[\w/]+["']/g,
    require: /\brequire\(/g,
    Buffer: /\bBuffer\b/g,
    process: /\bprocess\.\w/g,
  }
  for (const [kind, pattern] of Object.entries(patterns)) {
    const hits = code.match(pattern)
    if (hits) found[kind] = hits.length
  }
  return found
}

/**
 * Bundles every entry and measures it.
 * @returns {Promise<{ name: string, minBytes: number, gzipBytes: number, nodeisms: object, timers: number }[]>}
 */
export async function measureBundles() {
  const out = []
  for (const [name, contents] of Object.entries(ENTRIES)) {
    const code = await bundle(contents)
    out.push({
      name,
      minBytes: Buffer.byteLength(code),
      gzipBytes: gzipSync(code, { level: 9 }).length,
      nodeisms: nodeisms(code),
      // setTimeout appears only off the decision path: the shaping delay and a remote store's deadline.
      timers: (code.match(/\bsetTimeout\b/g) ?? []).length,
    })
  }
  return out
}

/**
 * The budget lines, from measurements: [label, bytes, budget]. The whole edge app is held to a
 * ceiling only; it is compared with the core budget's 12 KB in the printout, for information.
 */
export function budgetLines(measured) {
  const [core, app, withDo] = measured
  return [
    ['core + memory store + headers + fetch adapter', core.gzipBytes, BUDGETS.core],
    ['edge app (+ createLimiter, every algorithm): ceiling', app.gzipBytes, BUDGETS.appCeiling],
    [
      'Durable Object store, added to the edge app',
      withDo.gzipBytes - app.gzipBytes,
      BUDGETS.durableObjectStore,
    ],
  ]
}

const kb = (bytes) => `${(bytes / KB).toFixed(2)} KB`

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const measured = await measureBundles()
  console.log('| bundle | min | min+gzip | node:/require/Buffer/process |')
  console.log('| :--- | ---: | ---: | :--- |')
  for (const m of measured) {
    const bad =
      Object.entries(m.nodeisms)
        .map(([k, n]) => `${k} ×${n}`)
        .join(', ') || 'none'
    console.log(`| ${m.name} | ${kb(m.minBytes)} | ${kb(m.gzipBytes)} | ${bad} |`)
  }
  console.log('\n| budget | measured | budget | |')
  console.log('| :--- | ---: | ---: | :--- |')
  let over = false
  for (const [label, bytes, budget] of budgetLines(measured)) {
    const ok = bytes <= budget
    over ||= !ok
    console.log(`| ${label} | ${kb(bytes)} | ${kb(budget)} | ${ok ? 'ok' : 'OVER'} |`)
  }
  const app = measured[1].gzipBytes
  console.log(
    `\nThe whole edge app is ${kb(app)}: ${app <= BUDGETS.core ? 'within' : 'over'} the ${kb(BUDGETS.core)} of the core budget.`,
  )
  const unclean = measured.some((m) => Object.keys(m.nodeisms).length > 0)
  if (unclean) console.log('\nNot runtime-neutral: see the node:/require/Buffer/process column.')
  process.exitCode = over || unclean ? 1 : 0
}
