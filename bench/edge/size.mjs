// Bundle budget for edge runtimes: what an edge app ships, bundled as Workers/Deno/Vercel Edge
// bundlers do (esbuild --bundle --platform=neutral --minify, ESM), measured minified and gzipped
// (level 9), and checked for anything that is not runtime-neutral (`node:` imports, `require`,
// Buffer, process).
//
//   npm run size            prints the table; exits 1 when a budget is exceeded
//   npm run size -- --why   also lists each source file's share of the app bundles
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

/** What a Worker, Deno, Bun or Vercel Edge app on the memory store ships, with `algorithms` imported. */
const app = (algorithms) => `
    export { createLimiter, memoryStore, ${algorithms} } from './index.ts'
    export { withRateLimit } from './adapters/fetch.ts'
    export { rateLimitHeaders } from './http/headers.ts'`

/** The app as a user writes it: one algorithm (the one the README's API example uses). */
const APP = app('slidingWindow')

/** The measured entries: name → source of the entry module (imports resolved against src/). */
export const ENTRIES = {
  // Issue 6's budget, as an app uses it: createLimiter (options validation, the in-process
  // decision path; a remote store's deadline, breaker, denial cache, approximate sync and
  // fallback come with that store, not here), the memory store with the one algorithm the app
  // imports, the header fields and the fetch adapter with the HTTP layer it runs on (identity,
  // problem+json).
  'app: createLimiter + memory store + headers + fetch adapter': APP,
  // The same app on Cloudflare with the Durable Object store (which brings the remote decision
  // path), its class built for the app's one algorithm (`durableObjectClass(slidingWindow)`, as
  // docs/stores/durable-object.md recommends) and the Workers glue.
  'app + Durable Object store (edgelimit/cloudflare)': `${APP}
    import { slidingWindow as algorithm } from './index.ts'
    import { durableObjectClass } from './cloudflare.ts'
    export const EdgelimitDurableObject = durableObjectClass(algorithm)
    export { cloudflareIdentity, cloudflarePeer, durableObjectStore, withWaitUntil } from './cloudflare.ts'`,
  // For information: the same with the ready-made class for all six algorithms.
  'for information: app + Durable Object store, EdgelimitDurableObject (all six algorithms)': `${APP}
    export { EdgelimitDurableObject, cloudflareIdentity, cloudflarePeer, durableObjectStore, withWaitUntil } from './cloudflare.ts'`,
  // For information (not judged): the app importing all six algorithms.
  'for information: the app with all six algorithms imported': app(ALGORITHMS),
  // For information: the parts alone, without createLimiter.
  'parts only: core + memory store + headers + fetch adapter (no createLimiter)': `
    export { compile, step } from './core/index.ts'
    export { memoryStore } from './stores/memory.ts'
    export { rateLimitHeaders } from './http/headers.ts'
    export { withRateLimit } from './adapters/fetch.ts'`,
}

/** Budgets in bytes (min+gzip): issue 6's two, and a ceiling that keeps the app from growing. */
export const BUDGETS = {
  app: 12 * KB,
  durableObjectStore: 4 * KB,
  appCeiling: 16 * KB,
}

/** Bundles one entry; returns its minified code and esbuild's metafile. */
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
    metafile: true,
    logLevel: 'silent',
  })
  return { code: result.outputFiles[0].text, metafile: result.metafile }
}

/**
 * Where a bundle's bytes come from: each source file's minified bytes in the output, and its
 * share of the gzipped size (pro rata to its minified bytes: gzip does not split by file).
 */
function contributors(metafile, minBytes, gzipBytes) {
  const output = Object.values(metafile.outputs)[0]
  return Object.entries(output.inputs)
    .filter(([, v]) => v.bytesInOutput > 0)
    .map(([file, v]) => ({
      file: file.replace(/^.*?packages\/edgelimit\/src\//, ''),
      minBytes: v.bytesInOutput,
      gzipShare: Math.round((v.bytesInOutput / minBytes) * gzipBytes),
    }))
    .sort((a, b) => b.minBytes - a.minBytes)
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
 * @returns {Promise<{ name: string, minBytes: number, gzipBytes: number, nodeisms: object, timers: number, contributors: object[] }[]>}
 */
export async function measureBundles() {
  const out = []
  for (const [name, contents] of Object.entries(ENTRIES)) {
    const { code, metafile } = await bundle(contents)
    const minBytes = Buffer.byteLength(code)
    const gzipBytes = gzipSync(code, { level: 9 }).length
    out.push({
      name,
      minBytes,
      gzipBytes,
      nodeisms: nodeisms(code),
      // setTimeout appears only off the decision path: the shaping delay and a remote store's deadline.
      timers: (code.match(/\bsetTimeout\b/g) ?? []).length,
      contributors: contributors(metafile, minBytes, gzipBytes),
    })
  }
  return out
}

/** The budget lines, from measurements: [label, bytes, budget]. */
export function budgetLines(measured) {
  const [app, withDo] = measured
  return [
    ['app: createLimiter + memory store + headers + fetch adapter', app.gzipBytes, BUDGETS.app],
    ['Durable Object store, added to the app', withDo.gzipBytes - app.gzipBytes, BUDGETS.durableObjectStore],
    ['app: ceiling (it must not grow while over budget)', app.gzipBytes, BUDGETS.appCeiling],
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
  if (process.argv.includes('--why')) {
    for (const m of measured.slice(0, 2)) {
      console.log(`\nWhere the bytes of "${m.name}" come from (largest first):\n`)
      console.log('| source file | min | ≈ min+gzip share |')
      console.log('| :--- | ---: | ---: |')
      for (const c of m.contributors) console.log(`| ${c.file} | ${c.minBytes} B | ${c.gzipShare} B |`)
    }
  }
  const unclean = measured.some((m) => Object.keys(m.nodeisms).length > 0)
  if (unclean) console.log('\nNot runtime-neutral: see the node:/require/Buffer/process column.')
  process.exitCode = over || unclean ? 1 : 0
}
