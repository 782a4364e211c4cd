// Real servers for the adapter matrix: each target serves every scenario of the table, one
// listener per scenario, on 127.0.0.1 with a free port. In-process targets use the source and a
// frozen manual clock; the Deno and Bun targets run `fetch-server.mjs`, which uses the built dist.
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { serve } from '@hono/node-server'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { expressRateLimit } from '../../../src/adapters/express.js'
import { fastifyRateLimit } from '../../../src/adapters/fastify.js'
import { withRateLimit } from '../../../src/adapters/fetch.js'
import { honoRateLimit } from '../../../src/adapters/hono.js'
import { nodeRateLimit } from '../../../src/adapters/node.js'
import type { RateLimitOptions } from '../../../src/http/rate-limit.js'
import * as lib from '../../../src/index.js'
import { manualClock } from '../../../src/testing/index.js'
import type { Scenario } from './scenarios.js'

/** Every scenario served: `url(i)` is the base URL of scenario `i`. */
export interface Running {
  url(index: number): string
  close(): Promise<void>
}

export interface Target {
  name: string
  start(scenarios: readonly Scenario[]): Promise<Running>
}

const HOST = '127.0.0.1'
const root = join(import.meta.dirname, '..', '..', '..', '..', '..')
const dist = join(import.meta.dirname, '..', '..', '..', 'dist')

/** The app behind every adapter: 200 `ok` with a header of its own, to show it is kept. */
const OK = { body: 'ok', headers: { 'X-Handler': 'yes' } }

function listen(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, HOST, () => resolve(`http://${HOST}:${(server.address() as AddressInfo).port}`))
  })
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections()
  return new Promise((resolve) => server.close(() => resolve()))
}

/** Starts one in-process server per scenario, each with its own limiters and a frozen clock. */
function inProcess(
  name: string,
  startOne: (options: RateLimitOptions) => Promise<{ url: string; close(): Promise<void> }>,
): Target {
  return {
    name,
    async start(scenarios) {
      const clock = manualClock(Date.now())
      const servers = await Promise.all(scenarios.map((s) => startOne(s.options(lib, clock))))
      return {
        url: (i) => servers[i]?.url ?? '',
        close: async () => {
          await Promise.all(servers.map((s) => s.close()))
        },
      }
    },
  }
}

async function fromNodeServer(server: Server) {
  const url = await listen(server)
  return { url, close: () => closeServer(server) }
}

function fail(res: ServerResponse, error: unknown) {
  res.statusCode = 500
  res.end(String(error))
}

export const nodeTarget = inProcess('node:http', (options) => {
  const limit = nodeRateLimit(options)
  const server = createServer((req, res) => {
    limit(req, res).then(
      (proceed) => {
        if (!proceed) return
        res.setHeader('X-Handler', 'yes')
        res.end(OK.body)
      },
      (error) => fail(res, error),
    )
  })
  return fromNodeServer(server)
})

export const expressTarget = inProcess('express', (options) => {
  const app = express()
  app.use(expressRateLimit(options))
  app.use((_req, res) => {
    res.set(OK.headers).send(OK.body)
  })
  return fromNodeServer(createServer(app))
})

export const fastifyTarget = inProcess('fastify', async (options) => {
  const app = Fastify()
  await app.register(fastifyRateLimit, options)
  app.all('/*', async (_request, reply) => {
    reply.headers(OK.headers)
    return OK.body
  })
  const url = await app.listen({ port: 0, host: HOST })
  return { url, close: () => app.close() }
})

export const honoTarget = inProcess('hono (@hono/node-server)', async (options) => {
  const app = new Hono()
  app.use(honoRateLimit(options))
  app.all('*', (c) => {
    c.header('X-Handler', 'yes')
    return c.text(OK.body)
  })
  const server = await new Promise<Server>((resolve) => {
    const s: Server = serve({ fetch: app.fetch, port: 0, hostname: HOST }, () => resolve(s)) as Server
  })
  return { url: `http://${HOST}:${(server.address() as AddressInfo).port}`, close: () => closeServer(server) }
})

/** What the test bridge passes next to the Request, as Deno passes `info`. */
interface BridgeInfo {
  remoteAddress: string | undefined
}

/** A minimal node:http → Request → Response bridge, to serve a fetch handler from Node. */
function serveFetch(handler: (request: Request, info: BridgeInfo) => Promise<Response>): Server {
  return createServer(async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const headers = new Headers()
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value)
      }
      const chunks: Buffer[] = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks)
      // Aborted when the client leaves before the answer, as Node's fetch servers (@hono/node-server) do.
      const left = new AbortController()
      res.once('close', () => {
        if (!res.writableFinished) left.abort()
      })
      const request = new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers,
        body,
        signal: left.signal,
      })
      const response = await handler(request, { remoteAddress: req.socket.remoteAddress })
      const out: [string, string][] = []
      response.headers.forEach((value, name) => {
        out.push([name, value])
      })
      res.writeHead(response.status, out.flat())
      res.end(Buffer.from(await response.arrayBuffer()))
    } catch (error) {
      fail(res, error)
    }
  })
}

export const fetchNodeTarget = inProcess('fetch (Node bridge)', (options) => {
  // The handler's runs for this listener so far, this one included.
  let handled = 0
  const handler = withRateLimit(
    (_request: Request, _info: BridgeInfo) =>
      new Response(OK.body, { headers: { ...OK.headers, 'X-Handled': String(++handled) } }),
    {
      ...options,
      peer: (_request, info: BridgeInfo) => info.remoteAddress,
    },
  )
  return fromNodeServer(serveFetch(handler))
})

const children = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})

/**
 * Runs `fetch-server.mjs` (the built dist) in Deno or Bun, serving the scenarios by name; it prints
 * `{ ports }` once listening.
 */
function subprocess(name: string, command: string, args: readonly string[], adapter = 'fetch'): Target {
  return {
    name,
    async start(scenarios) {
      if (!existsSync(join(dist, 'fetch.js')))
        throw new Error(`${dist}/fetch.js is missing: run \`npm run build\` first`)
      const script = join(import.meta.dirname, 'fetch-server.mjs')
      const names = JSON.stringify(scenarios.map((s) => s.name))
      const child = spawn(join(root, 'node_modules', '.bin', command), [...args, script, names, adapter], {
        cwd: root,
        stdio: ['pipe', 'pipe', 'pipe'],
      })
      children.add(child)
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      const stop = async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
        await exited
        children.delete(child)
      }
      try {
        const ports = await new Promise<number[]>((resolve, reject) => {
          let out = ''
          let err = ''
          const timer = setTimeout(() => reject(new Error(`${name} did not start in 20 s: ${err}`)), 20_000)
          child.stderr?.on('data', (d) => {
            err += d
          })
          child.stdout?.on('data', (d) => {
            out += d
            const line = out.split('\n')[0] as string
            if (out.includes('\n')) {
              clearTimeout(timer)
              resolve(JSON.parse(line).ports)
            }
          })
          child.once('exit', (code) => {
            clearTimeout(timer)
            reject(new Error(`${name} exited with ${code}: ${err}`))
          })
        })
        if (ports.length !== scenarios.length) throw new Error(`${name} serves ${ports.length} scenarios`)
        return { url: (i) => `http://${HOST}:${ports[i]}`, close: stop }
      } catch (error) {
        await stop()
        throw error
      }
    },
  }
}

const denoArgs = ['run', '--no-lock', '--allow-net', '--allow-read', '--allow-env']

export const denoTarget = subprocess('fetch (Deno)', 'deno', denoArgs)

/** The built Hono middleware in a Hono app on `Deno.serve`, as `hono/deno` serves it. */
export const honoDenoTarget = subprocess('hono (Deno)', 'deno', denoArgs, 'hono')

export const bunTarget = subprocess('fetch (Bun)', 'bun', [])
