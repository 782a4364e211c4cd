// One hello-world server for bench/http.mjs, in its own process: `node bench/http/server.mjs
// '<case JSON>'` with { adapter, limited, scenario, dist }. It listens on 127.0.0.1 (free port),
// prints {"port":…} and then answers commands on stdin, one per line:
//   mark  → zero the counters and the CPU baseline, reply {"ok":true}
//   stats → reply { served, statuses, cpuUs } since the last mark
// It exits when stdin closes, so it never outlives the benchmark.
//
// `limited: false` is the same server without the adapter. Scenario `admit`: one limiter whose
// limit is never reached (every request admitted). Scenario `deny`: `/deny` has a route limiter
// of 1 per hour, so every request there but the first is denied (wrk alternates `/` and `/deny`).

import { createServer } from 'node:http'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'

const spec = JSON.parse(process.argv[2])
const lib = (name) => import(pathToFileURL(path.join(spec.dist, `${name}.js`)).href)
const HELLO = 'hello world'

const statuses = new Map()
let served = 0
function count(status) {
  served++
  statuses.set(status, (statuses.get(status) ?? 0) + 1)
}

async function options() {
  const { createLimiter, fixedWindow } = await lib('index')
  const never = createLimiter({
    rules: [{ name: 'api', algorithm: fixedWindow({ limit: 500_000_000, window: '1h' }) }],
  })
  if (spec.scenario !== 'deny') return { limiter: never }
  const once = createLimiter({
    rules: [{ name: 'deny', algorithm: fixedWindow({ limit: 1, window: '1h' }) }],
  })
  return { limiter: never, routes: [{ path: '/deny', limiter: once }] }
}

/**
 * The control rows' fields, by hand: what the adapter sends on an admitted response (scenario
 * admit's limiter), `ratelimit-policy` constant and `ratelimit` with a falling remaining count, named in lower case as the adapter names them.
 */
function byHand() {
  const policy = '"api";q=500000000;w=3600'
  const windowEnd = Date.now() + 3_600_000
  let remaining = 500_000_000
  return (set) => {
    const seconds = Math.ceil((windowEnd - Date.now()) / 1000)
    set('ratelimit-policy', policy)
    set('ratelimit', `"api";r=${--remaining};t=${seconds}`)
  }
}

/** Starts the server; resolves its port. `res.on('finish')` counts every answer, limited or not. */
async function start() {
  const counted = (handler) => (req, res) => {
    res.on('finish', () => count(res.statusCode))
    handler(req, res)
  }
  const listenNode = (handler) =>
    new Promise((resolve) => {
      const server = createServer(counted(handler))
      server.listen(0, '127.0.0.1', () => resolve(server.address().port))
    })

  // A control row (`fields`, `<framework>-fields`) runs its framework's server and, when
  // limited, sets the fields by hand where the adapter would run instead of using edgelimit.
  const control = spec.adapter.endsWith('fields')
  const framework = spec.adapter === 'fields' ? 'node' : spec.adapter.replace(/-fields$/, '')
  const fields = control && spec.limited ? byHand() : undefined

  switch (framework) {
    case 'node': {
      if (!spec.limited) return listenNode((_req, res) => res.end(HELLO))
      if (fields !== undefined) {
        return listenNode((_req, res) => {
          fields((name, value) => res.setHeader(name, value))
          res.end(HELLO)
        })
      }
      const { nodeRateLimit } = await lib('node')
      const limit = nodeRateLimit(await options())
      return listenNode((req, res) => {
        limit(req, res).then(
          (proceed) => {
            if (proceed) res.end(HELLO)
          },
          () => {
            res.statusCode = 500
            res.end()
          },
        )
      })
    }
    case 'express': {
      const { default: express } = await import('express')
      const app = express()
      app.disable('x-powered-by')
      app.disable('etag')
      if (fields !== undefined) {
        app.use((_req, res, next) => {
          fields((name, value) => res.setHeader(name, value))
          next()
        })
      } else if (spec.limited) app.use((await lib('express')).expressRateLimit(await options()))
      app.use((_req, res) => {
        res.send(HELLO)
      })
      return listenNode(app)
    }
    case 'fastify': {
      const { default: Fastify } = await import('fastify')
      const app = Fastify({ logger: false })
      if (fields !== undefined) {
        app.addHook('onRequest', (_request, reply, done) => {
          fields((name, value) => reply.header(name, value))
          done()
        })
      } else if (spec.limited) await app.register((await lib('fastify')).fastifyRateLimit, await options())
      app.get('/*', async () => HELLO)
      app.addHook('onResponse', async (_request, reply) => {
        count(reply.statusCode)
      })
      await app.listen({ port: 0, host: '127.0.0.1' })
      return app.server.address().port
    }
    case 'hono': {
      const { Hono } = await import('hono')
      const { serve } = await import('@hono/node-server')
      const app = new Hono()
      if (fields !== undefined) {
        // As honoRateLimit sets them on @hono/node-server.
        app.use((c, next) => {
          fields((name, value) => c.env.outgoing.setHeader(name, value))
          return next()
        })
      } else if (spec.limited) app.use((await lib('hono')).honoRateLimit(await options()))
      app.get('*', (c) => c.text(HELLO))
      return new Promise((resolve) => {
        const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
          resolve(info.port),
        )
        server.on('request', (_req, res) => res.on('finish', () => count(res.statusCode)))
      })
    }
    case 'fetch': {
      const hello = () => new Response(HELLO, { headers: { 'content-type': 'text/plain; charset=utf-8' } })
      const handler = spec.limited
        ? (await lib('fetch')).withRateLimit(hello, {
            ...(await options()),
            peer: (_request, info) => info.remoteAddress,
          })
        : hello
      return listenNode(bridge(handler))
    }
    default:
      throw new Error(`unknown adapter ${spec.adapter}`)
  }
}

/** node:http → Request → fetch handler → Response → node:http; the same with or without limiting. */
function bridge(handler) {
  return async (req, res) => {
    try {
      const headers = new Headers()
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value)
      }
      const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers })
      const response = await handler(request, { remoteAddress: req.socket.remoteAddress })
      const out = []
      response.headers.forEach((value, name) => {
        out.push(name, value)
      })
      res.writeHead(response.status, out)
      res.end(Buffer.from(await response.arrayBuffer()))
    } catch {
      res.statusCode = 500
      res.end()
    }
  }
}

const port = await start()
process.stdout.write(`${JSON.stringify({ port })}\n`)

let cpu = process.cpuUsage()
const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  if (line === 'mark') {
    served = 0
    statuses.clear()
    cpu = process.cpuUsage()
    process.stdout.write(`${JSON.stringify({ ok: true })}\n`)
  } else if (line === 'stats') {
    const used = process.cpuUsage(cpu)
    process.stdout.write(
      `${JSON.stringify({ served, statuses: Object.fromEntries(statuses), cpuUs: used.user + used.system })}\n`,
    )
  }
})
lines.on('close', () => process.exit(0))
