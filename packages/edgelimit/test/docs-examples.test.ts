// Every ```js and ```ts block of docs/*.md, docs/adapters/*.md and docs/stores/*.md runs as written
// against the built package, as readme.test.ts does for the README: a new block is run by default,
// and only the blocks SKIP names (each with its reason) are not. Three ways to run, read off the
// block:
// - a script runs to its end (exit 0) and prints what its `console.log(…) // …` comments state;
// - a server (it listens on port 3000) is started on a free port instead, answers 200 with
//   rate-limit headers, then 429 problems under a burst, and is stopped by the test;
// - a module exporting a handler (Workers' `export default { fetch }`, Vercel's `GET`) is called
//   in a loop, with the client header its `identity` names, and answers the same way.
// `.ts` blocks lose their types (esbuild) and run in Node, or in Bun when they call `Bun.`.
// The gateway's YAML blocks are checked by packages/gateway/test/docs-examples.test.ts.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { transform } from 'esbuild'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { expectedLines, withinWindows } from './support/examples.js'
import { freePorts, HOST, type RedisServer, startRedis } from './support/redis.js'

const root = join(import.meta.dirname, '..', '..', '..')
const pages = ['docs', 'docs/adapters', 'docs/stores'].flatMap((dir) =>
  readdirSync(join(root, dir))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `${dir}/${f}`),
)

interface Block {
  page: string
  /** Line of the opening fence. */
  line: number
  lang: 'js' | 'ts'
  code: string
}

function codeBlocks(page: string): Block[] {
  const lines = readFileSync(join(root, page), 'utf8').split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i] as string)
    if (!open) continue
    const indent = (open[1] as string).length
    let j = i + 1
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j] as string)) j++
    const lang = open[2]
    if (lang === 'js' || lang === 'ts') {
      const code = lines.slice(i + 1, j).map((l) => l.slice(indent))
      blocks.push({ page, line: i + 1, lang, code: `${code.join('\n')}\n` })
    }
    i = j
  }
  return blocks
}

/** Blocks that are not run, found by a snippet of theirs, and why. */
const SKIP: { page: string; contains: string; why: string }[] = [
  {
    page: 'docs/adapters/fetch.md',
    contains: "from 'npm:edgelimit'",
    why: 'Deno: `npm:edgelimit` resolves from the npm registry, not the built package',
  },
  {
    page: 'docs/adapters/fetch.md',
    contains: 'server.upgrade(request)',
    why: "fragment: the Bun example's imports and limiter come from the block before it",
  },
  {
    page: 'docs/adapters/hono.md',
    contains: 'getConnInfo',
    why: 'fragment: `app` and `limiter` of the page',
  },
  { page: 'docs/edge.md', contains: 'Redis.fromEnv', why: 'needs a real Upstash endpoint' },
  {
    page: 'docs/edge.md',
    contains: "from 'npm:@upstash/redis'",
    why: 'needs a real Upstash endpoint (and npm:)',
  },
  {
    page: 'docs/stores/durable-object.md',
    contains: "from 'cloudflare:workers'",
    why: 'needs a Cloudflare Durable Object binding (test/workerd runs the store in Miniflare)',
  },
  {
    page: 'docs/stores/durable-object.md',
    contains: 'durableObjectClass(tokenBucket, slidingWindow)',
    why: 'fragment: replaces one line of the block before it',
  },
  {
    page: 'docs/stores/redis.md',
    contains: 'Promise.all([limiter.limit(',
    why: "fragment: the page's first example's limiter and client",
  },
  {
    page: 'docs/simulate-replay.md',
    contains: "from './server/gateway.js'",
    why: "imports the gateway's sources (packages/gateway/src), not a package",
  },
  {
    page: 'docs/simulate-replay.md',
    contains: "from './replay/index.js'",
    why: "imports the gateway's sources (packages/gateway/src), not a package",
  },
]

const blocks = pages.flatMap(codeBlocks)
const skipOf = (b: Block) => SKIP.find((s) => s.page === b.page && b.code.includes(s.contains))

const scratch = join(root, 'node_modules', '.cache', `edgelimit-docs-examples-${process.pid}`)
const children = new Set<ChildProcess>()
let redis: RedisServer
beforeAll(async () => {
  mkdirSync(scratch, { recursive: true })
  redis = await startRedis()
})
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL')
  rmSync(scratch, { recursive: true, force: true })
  await redis?.stop()
})

/** The block as a file its runtime loads: `.ts` for Bun, types stripped for Node. */
async function file(block: Block, name: string): Promise<{ path: string; runtime: string }> {
  const bun = block.code.includes('Bun.')
  const code =
    block.lang === 'ts' && !bun
      ? (await transform(block.code, { loader: 'ts', format: 'esm' })).code
      : block.code
  const path = join(scratch, `${name}.${bun ? 'ts' : 'mjs'}`)
  writeFileSync(path, code)
  return { path, runtime: bun ? join(root, 'node_modules', '.bin', 'bun') : process.execPath }
}

function run(
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd: root, timeout: 20_000, env: { ...process.env, REDIS_URL: redis.url, ...env } },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error.code as number | null) ?? null) : 0, stdout, stderr }),
    )
  })
}

interface Answer {
  status: number
  type: string | null
  policy: string | null
  body: string
}

/** A limited endpoint answers 200 with its policy, then 429 problems once the burst is spent. */
function expectLimited(first: Answer, burst: Answer[]): void {
  expect(first.status, first.body).toBe(200)
  expect(first.policy).toMatch(/\w/)
  const denied = burst.filter((a) => a.status === 429)
  expect(burst.filter((a) => a.status !== 200 && a.status !== 429)).toEqual([])
  expect(denied.length).toBeGreaterThan(0)
  for (const a of denied) {
    expect(a.type).toBe('application/problem+json')
    expect(JSON.parse(a.body)).toMatchObject({ status: 429 })
  }
}

async function answer(r: Response): Promise<Answer> {
  const policy = r.headers.get('ratelimit-policy') ?? r.headers.get('x-ratelimit-limit')
  return { status: r.status, type: r.headers.get('content-type'), policy, body: await r.text() }
}

/**
 * A script example's own report (its `onEvent` warning, docs/resilience.md) that a store call missed
 * the 45 ms default deadline: on a loaded machine the first script load can, and a `closed` rule then
 * denies as documented. Its printed answers hold for a store that answers in time: run it again.
 */
const MISSED_DEADLINE = /^rate-limit store timeout$/m

async function script(block: Block, name: string): Promise<void> {
  const { path, runtime } = await file(block, name)
  // Run again if it spanned the end of a window it counts in on the system clock or Redis TIME,
  // or (up to 3 runs) if its store missed the deadline, which the example itself reports.
  const once = () => withinWindows(block.code, () => run(runtime, [path]))
  let result = await once()
  for (let tries = 1; tries < 3 && MISSED_DEADLINE.test(result.stderr); tries++) result = await once()
  const { code, stdout, stderr } = result
  expect(code, stderr).toBe(0)
  const expected = expectedLines(block.code)
  if (expected.length > 0) expect(stdout.trim().split('\n')).toEqual(expected)
}

/**
 * One request as a client sends it: a 503 "store unavailable" problem (the example's store missed
 * its 45 ms deadline on a loaded machine: the default fails closed) is asked again after a pause, as
 * its Retry-After invites; anything else is the answer.
 */
async function ask(url: string): Promise<Answer> {
  for (let tries = 1; ; tries++) {
    const a = await fetch(url).then(answer)
    if (a.status !== 503 || !a.body.includes('temporary-reduced-capacity') || tries === 5) return a
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function server(block: Block, name: string): Promise<void> {
  const [port] = await freePorts(1)
  const { path, runtime } = await file(
    { ...block, code: block.code.replace(/\b3000\b/g, String(port)) },
    name,
  )
  const child = spawn(runtime, [path], { cwd: root, env: { ...process.env, REDIS_URL: redis.url } })
  children.add(child)
  let stderr = ''
  child.stderr?.on('data', (d) => {
    stderr += d
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  try {
    const url = `http://${HOST}:${port}${/\.get\('([^'*]+)'/.exec(block.code)?.[1] ?? '/'}`
    let first: Answer | undefined
    for (let tries = 0; first === undefined; tries++) {
      if (child.exitCode !== null || tries > 200) throw new Error(`${name} did not listen: ${stderr}`)
      first = await ask(url).then(undefined, () => new Promise<undefined>((r) => setTimeout(r, 50)))
    }
    const burst = await Promise.all(Array.from({ length: 40 }, () => ask(url)))
    expectLimited(first, burst)
  } finally {
    child.kill('SIGTERM')
    await exited
    children.delete(child)
  }
}

async function handler(block: Block, name: string): Promise<void> {
  const { path } = await file(block, name)
  const header = /header: '([\w-]+)'/.exec(block.code)?.[1] ?? 'x-client'
  const harness = `
    const mod = await import(${JSON.stringify(pathToFileURL(path).href)})
    const handler = mod.default?.fetch ?? mod.GET
    const ctx = { waitUntil() {}, passThroughOnException() {} }
    const answers = []
    for (let i = 0; i < 40; i++) {
      const r = await handler(new Request('https://example.test/', { headers: { ${JSON.stringify(header)}: '203.0.113.7' } }), {}, ctx)
      const policy = r.headers.get('ratelimit-policy') ?? r.headers.get('x-ratelimit-limit')
      answers.push({ status: r.status, type: r.headers.get('content-type'), policy, body: await r.text() })
    }
    console.log(JSON.stringify(answers))`
  const { code, stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', harness])
  expect(code, stderr).toBe(0)
  const [first, ...rest] = JSON.parse(stdout) as Answer[]
  expectLimited(first as Answer, rest)
}

describe('docs examples', () => {
  it('finds the blocks, and every SKIP entry names exactly one', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(20)
    for (const s of SKIP) {
      const found = blocks.filter((b) => b.page === s.page && b.code.includes(s.contains))
      expect(found.length, `${s.page}: ${s.contains}`).toBe(1)
    }
  })
})

describe.concurrent('docs examples run as written', () => {
  for (const block of blocks.filter((b) => skipOf(b) === undefined)) {
    const name = `${block.page.replace(/\W+/g, '-')}-${block.line}`
    if (/\b3000\b/.test(block.code)) it(`${name}: serves, limited`, () => server(block, name))
    else if (/^export (default \{|const GET\b)/m.test(block.code))
      it(`${name}: handles requests, limited`, () => handler(block, name))
    else it(`${name}: runs and prints what it states`, () => script(block, name))
  }
})
