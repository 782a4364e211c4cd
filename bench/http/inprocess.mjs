// The adapters' CPU cost per request, in-process: each hello-world app of bench/http.mjs is driven
// through its request listener with socket-less IncomingMessage/ServerResponse pairs (no kernel,
// no load generator), without and with the adapter, each variant in its own short-lived process,
// the processes interleaved so that machine load hits the variants alike; the minimum counts. A developer's
// measure for a busy machine: it leaves out what the socket costs (bench/http.mjs is the judge).
//
//   node bench/http/inprocess.mjs [--dist <dir>] [--compare <dir>] [--only <adapter>] [--noop]
//                                 [--repeats <n>] [--rounds <n>]
//
// --noop adds a variant with a pass-through middleware (hook, wrapper) in the adapter's place:
// what being a middleware at all costs in that framework, the floor for any adapter.
// --dist: the build to measure (default node_modules/edgelimit's); --compare: a second build, as a
// third variant (e.g. the previous version's dist). Prints µs per request and the difference.

import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { flagValue } from '../lib/machine.mjs'

const argv = process.argv.slice(2)
const value = (name, fallback) => flagValue(argv, name, fallback)
const defaultDist = path.dirname(fileURLToPath(import.meta.resolve('edgelimit')))
const builds = [['with', path.resolve(value('--dist', defaultDist))]]
if (value('--compare') !== undefined) builds.push(['compare', path.resolve(value('--compare'))])
if (argv.includes('--noop')) builds.push(['noop', 'noop'])
const ROUNDS = Number(value('--rounds', 20))
const BATCH = 200
const HELLO = 'hello world'
const ADAPTERS = ['node', 'express', 'fastify', 'hono', 'fetch'].filter(
  (a) => value('--only') === undefined || a === value('--only'),
)

async function limiterOptions(dist) {
  const { createLimiter, fixedWindow } = await import(pathToFileURL(path.join(dist, 'index.js')).href)
  return {
    limiter: createLimiter({
      rules: [{ name: 'api', algorithm: fixedWindow({ limit: 500_000_000, window: '1h' }) }],
    }),
  }
}

/** The request listener of one variant: `dist` undefined = without the adapter; 'noop' = a pass-through. */
async function listener(adapter, dist) {
  const lib = async (name) => import(pathToFileURL(path.join(dist, `${name}.js`)).href)
  if (dist === 'noop') return noop(adapter)
  switch (adapter) {
    case 'node': {
      if (dist === undefined) return (_req, res) => res.end(HELLO)
      const limit = (await lib('node')).nodeRateLimit(await limiterOptions(dist))
      return (req, res) => {
        limit(req, res).then((proceed) => {
          if (proceed) res.end(HELLO)
        })
      }
    }
    case 'express': {
      const { default: express } = await import('express')
      const app = express()
      app.disable('x-powered-by')
      app.disable('etag')
      if (dist !== undefined) app.use((await lib('express')).expressRateLimit(await limiterOptions(dist)))
      app.use((_req, res) => {
        res.send(HELLO)
      })
      return app
    }
    case 'fastify': {
      const { default: Fastify } = await import('fastify')
      const app = Fastify({ logger: false })
      if (dist !== undefined)
        await app.register((await lib('fastify')).fastifyRateLimit, await limiterOptions(dist))
      app.get('/*', async () => HELLO)
      await app.ready()
      return (req, res) => app.routing(req, res)
    }
    case 'hono': {
      const { Hono } = await import('hono')
      const { getRequestListener } = await import('@hono/node-server')
      const app = new Hono()
      if (dist !== undefined) app.use((await lib('hono')).honoRateLimit(await limiterOptions(dist)))
      app.get('*', (c) => c.text(HELLO))
      return getRequestListener(app.fetch)
    }
    case 'fetch': {
      const hello = () => new Response(HELLO, { headers: { 'content-type': 'text/plain; charset=utf-8' } })
      const handler =
        dist === undefined
          ? hello
          : (await lib('fetch')).withRateLimit(hello, {
              ...(await limiterOptions(dist)),
              peer: (_request, info) => info.remoteAddress,
            })
      return bridge(handler)
    }
  }
  throw new Error(`unknown adapter ${adapter}`)
}

/** The bridge of bench/http/server.mjs: node:http → Request → handler → Response → node:http. */
function bridge(handler) {
  return async (req, res) => {
    const headers = new Headers()
    for (const [name, v] of Object.entries(req.headers)) {
      if (v !== undefined) headers.set(name, Array.isArray(v) ? v.join(', ') : v)
    }
    const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers })
    const response = await handler(request, { remoteAddress: req.socket.remoteAddress })
    const out = []
    response.headers.forEach((v, name) => {
      out.push(name, v)
    })
    res.writeHead(response.status, out)
    res.end(Buffer.from(await response.arrayBuffer()))
  }
}

/** The same apps with a middleware that does nothing in the adapter's place. */
async function noop(adapter) {
  switch (adapter) {
    case 'node': {
      const pass = () => Promise.resolve(true)
      return (req, res) => {
        pass(req, res).then((proceed) => {
          if (proceed) res.end(HELLO)
        })
      }
    }
    case 'express': {
      const { default: express } = await import('express')
      const app = express()
      app.disable('x-powered-by')
      app.disable('etag')
      app.use((_req, _res, next) => next())
      app.use((_req, res) => {
        res.send(HELLO)
      })
      return app
    }
    case 'fastify': {
      const { default: Fastify } = await import('fastify')
      const app = Fastify({ logger: false })
      app.addHook('onRequest', (_request, _reply, done) => done())
      app.get('/*', async () => HELLO)
      await app.ready()
      return (req, res) => app.routing(req, res)
    }
    case 'hono': {
      const { Hono } = await import('hono')
      const { getRequestListener } = await import('@hono/node-server')
      const app = new Hono()
      app.use((_c, next) => next())
      app.get('*', (c) => c.text(HELLO))
      return getRequestListener(app.fetch)
    }
    case 'fetch': {
      const hello = () => new Response(HELLO, { headers: { 'content-type': 'text/plain; charset=utf-8' } })
      return bridge((request, ...rest) => Promise.resolve(hello(request, ...rest)))
    }
  }
}

const socket = new Socket()
Object.defineProperty(socket, 'remoteAddress', { value: '127.0.0.1' })

/** One request through `handle`; resolves the response once `end()` was called. */
function once(handle) {
  const req = new IncomingMessage(socket)
  req.method = 'GET'
  req.url = '/'
  req.headers = { host: '127.0.0.1:8080', 'user-agent': 'wrk' }
  req.rawHeaders = ['Host', '127.0.0.1:8080', 'User-Agent', 'wrk']
  req.push(null)
  req.complete = true
  const res = new ServerResponse(req)
  return new Promise((resolve) => {
    const end = res.end
    res.end = function (...args) {
      const r = end.apply(this, args)
      resolve(res)
      return r
    }
    handle(req, res)
  })
}

async function round(handle) {
  const started = process.cpuUsage()
  let last
  for (let k = 0; k < 10; k++) last = await Promise.all(Array.from({ length: BATCH }, () => once(handle)))
  const used = process.cpuUsage(started)
  return { us: (used.user + used.system) / (10 * BATCH), res: last[0] }
}

/** Child mode: one variant of one adapter in this process; prints its minimum µs per request. */
async function child(adapter, name, dist, rounds) {
  const handle = await listener(adapter, dist === '-' ? undefined : dist)
  let best = Number.POSITIVE_INFINITY
  let header = ''
  for (let r = 0; r < rounds + 5; r++) {
    const { us, res } = await round(handle)
    if (r >= 5) best = Math.min(best, us)
    if (res.statusCode !== 200) throw new Error(`${adapter} ${name}: status ${res.statusCode}`)
    header = String(
      res.getHeader('ratelimit') ?? /ratelimit: ([^\r]*)/i.exec(String(res.outputData?.[0]?.data))?.[1],
    )
  }
  process.stdout.write(`${JSON.stringify({ us: best, header })}\n`)
}

if (argv[0] === '--child') {
  await child(argv[1], argv[2], argv[3], Number(argv[4]))
  process.exit(0)
}

// Each variant runs in its own process (no shared inline caches between builds), the processes
// one at a time and the variants interleaved, REPEATS times; the minimum counts.
const { execFileSync } = await import('node:child_process')
const REPEATS = Number(value('--repeats', 4))
const SELF = fileURLToPath(import.meta.url)
console.log(
  `in-process CPU µs per request: min over ${REPEATS} processes × ${ROUNDS} rounds of ${10 * BATCH} requests`,
)
const variants = [['without', '-'], ...builds]
for (const adapter of ADAPTERS) {
  const best = new Map(variants.map(([name]) => [name, Number.POSITIVE_INFINITY]))
  let header = ''
  for (let r = 0; r < REPEATS; r++) {
    for (const [name, dist] of r % 2 === 0 ? variants : [...variants].reverse()) {
      const out = execFileSync(process.execPath, [SELF, '--child', adapter, name, dist, String(ROUNDS)], {
        encoding: 'utf8',
      })
      const result = JSON.parse(out.trim().split('\n').at(-1))
      best.set(name, Math.min(best.get(name), result.us))
      if (name === 'with') header = result.header
    }
  }
  const base = best.get('without')
  console.log(
    `${adapter.padEnd(8)} ${[...best].map(([name, us]) => `${name} ${us.toFixed(2)}${name === 'without' ? '' : ` (+${(us - base).toFixed(2)})`}`).join('   ')}   RateLimit: ${header}`,
  )
}
process.exit(0)
