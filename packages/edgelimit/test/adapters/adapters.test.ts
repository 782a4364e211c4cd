// What only one adapter can get wrong: its runtime's shapes (immutable Responses, extra handler
// arguments, mount paths, plugin scopes, error paths). The shared behaviour is in matrix.test.ts.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request as httpRequest, type Server } from 'node:http'
import {
  connect as connectHttp2,
  createServer as createHttp2Server,
  constants as http2Constants,
} from 'node:http2'
import { type AddressInfo, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createAdaptorServer, serve } from '@hono/node-server'
import express from 'express'
import Fastify, { type FastifyServerOptions } from 'fastify'
import { Hono } from 'hono'
import { describe, expect, it } from 'vitest'
import { expressRateLimit } from '../../src/adapters/express.js'
import { fastifyRateLimit } from '../../src/adapters/fastify.js'
import { bunPeer, denoPeer, withRateLimit } from '../../src/adapters/fetch.js'
import { honoRateLimit } from '../../src/adapters/hono.js'
import { nodeRateLimit } from '../../src/adapters/node.js'
import type { RateLimitOptions } from '../../src/http/rate-limit.js'
import {
  ConfigError,
  createLimiter,
  type Duration,
  gcra,
  type Limiter,
  leakyBucket,
} from '../../src/index.js'
import { manualClock } from '../../src/testing/index.js'
import { farWindow } from '../support/window.js'

/** One request per hour, no burst: the second request from the same client is denied. */
function onePerHour(name = 'hourly') {
  return createLimiter({
    rules: [{ name, algorithm: gcra({ limit: 1, period: '1h' }) }],
    clock: manualClock(0),
  })
}

function closeAll(server: Server): Promise<void> {
  server.closeAllConnections()
  return new Promise((resolve) => server.close(() => resolve()))
}

const req = (path = '/') => new Request(`http://127.0.0.1${path}`)
/** The repository root (Bun is its devDependency). */
const root = join(import.meta.dirname, '..', '..', '..', '..')

describe('fetch adapter', () => {
  it('adds the headers to a response whose headers are immutable', async () => {
    const handler = withRateLimit(() => Response.redirect('http://127.0.0.1/next', 302), {
      limiter: onePerHour(),
    })
    const res = await handler(req())
    expect(res.status).toBe(302)
    expect(res.headers.get('location')).toBe('http://127.0.0.1/next')
    expect(res.headers.get('ratelimit')).toBe('"hourly";r=0;t=3600')
  })

  it('passes a network error (Response.error()) on as it is: its headers cannot change, nor can it be copied', async () => {
    // A copy of it is a Response of status 0, which the constructor refuses: it was a RangeError.
    const handler = withRateLimit(() => Response.error(), { limiter: onePerHour() })
    const res = await handler(req())
    expect(res.type).toBe('error')
    expect(res.status).toBe(0)
  })

  it("adds to the handler's own draft-10 fields, keeps its other rate-limit fields (draft-10 §7.2)", async () => {
    // An app quota the handler reports, as a proxied upstream does: the client must still see it.
    const own = { RateLimit: '"app";r=0;t=1800', 'RateLimit-Policy': '"app";q=10;w=3600' }
    const handler = withRateLimit(() => new Response('ok', { headers: own }), { limiter: onePerHour() })
    const res = await handler(req())
    expect([res.headers.get('ratelimit'), res.headers.get('ratelimit-policy')]).toEqual([
      '"app";r=0;t=1800, "hourly";r=0;t=3600',
      '"app";q=10;w=3600, "hourly";q=1;w=3600',
    ])
    // A group of fields that is not a list describes one policy: any field of it the handler sets
    // keeps the whole group the handler's (no limit of ours beside its remaining).
    const single = withRateLimit(
      () =>
        new Response('ok', {
          headers: { RateLimit: 'limit=10, remaining=0, reset=1800', 'X-RateLimit-Remaining': '0' },
        }),
      { limiter: onePerHour(), headers: ['draft-7', 'legacy'] },
    )
    const fields = (await single(req())).headers
    const names = [
      'ratelimit',
      'ratelimit-policy',
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
    ]
    expect(names.map((name) => fields.get(name))).toEqual([
      'limit=10, remaining=0, reset=1800',
      null,
      null,
      '0',
      null,
    ])
    // A group the handler left alone gets ours; a draft-10 field of ours joins no other form.
    const mixed = withRateLimit(
      () => new Response('ok', { headers: { RateLimit: 'limit=10, remaining=0, reset=1800' } }),
      { limiter: onePerHour(), headers: ['draft-10', 'legacy'] },
    )
    const both = (await mixed(req())).headers
    expect(names.map((name) => both.get(name))).toEqual([
      'limit=10, remaining=0, reset=1800',
      null,
      '1',
      '0',
      expect.stringMatching(/^\d+$/),
    ])
  })

  it("leaves a handler's draft-7 fields as they are: ours are not appended to another form", async () => {
    const draft7 = { RateLimit: 'limit=10, remaining=0, reset=9', 'RateLimit-Policy': '10;w=60' }
    const handler = withRateLimit(() => new Response('ok', { headers: draft7 }), { limiter: onePerHour() })
    const res = await handler(req())
    expect([res.headers.get('ratelimit'), res.headers.get('ratelimit-policy')]).toEqual([
      'limit=10, remaining=0, reset=9',
      '10;w=60',
    ])
  })

  it('adds to the draft-10 fields of a response from fetch() (immutable headers, so a copy)', async () => {
    const upstream = createServer((_req, res) => {
      res.setHeader('RateLimit', '"origin";r=0;t=1800')
      res.end('upstream')
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = upstream.address() as AddressInfo
      const handler = withRateLimit(() => fetch(`http://127.0.0.1:${port}/`), { limiter: onePerHour() })
      const res = await handler(req())
      expect([res.status, await res.text()]).toEqual([200, 'upstream'])
      expect(res.headers.get('ratelimit')).toBe('"origin";r=0;t=1800, "hourly";r=0;t=3600')
      expect(res.headers.get('ratelimit-policy')).toBe('"hourly";q=1;w=3600')
    } finally {
      upstream.close()
    }
  })

  it('passes extra arguments through to the handler and to peer', async () => {
    const seen: unknown[] = []
    const handler = withRateLimit(
      (_request: Request, env: { tag: string }, ctx: number) => {
        seen.push(env.tag, ctx)
        return new Response('ok')
      },
      { limiter: onePerHour(), peer: (_request, env) => (env.tag === 'a' ? '192.0.2.1' : '192.0.2.2') },
    )
    expect((await handler(req(), { tag: 'a' }, 1)).status).toBe(200)
    expect((await handler(req(), { tag: 'b' }, 2)).status).toBe(200)
    expect((await handler(req(), { tag: 'a' }, 3)).status).toBe(429)
    expect(seen).toEqual(['a', 1, 'b', 2])
  })

  it('reads the peer the way Deno and Bun hand it over', () => {
    expect(denoPeer(req(), { remoteAddr: { hostname: '192.0.2.7' } })).toBe('192.0.2.7')
    expect(bunPeer(req(), { requestIP: () => ({ address: '2001:db8::1' }) })).toBe('2001:db8::1')
    expect(bunPeer(req(), { requestIP: () => null })).toBeUndefined()
    expect(denoPeer(req())).toBeUndefined()
  })

  it('passes on no response (Bun: `if (server.upgrade(request)) return`) as none, in-process', async () => {
    const limiter = onePerHour()
    const handler = withRateLimit((_r: Request): Response | undefined => undefined, { limiter })
    await expect(handler(req())).resolves.toBeUndefined()
    const denied = await handler(req())
    expect(denied?.status).toBe(429)
    const later = withRateLimit(async (_r: Request): Promise<Response | undefined> => undefined, {
      limiter: onePerHour(),
    })
    await expect(later(req())).resolves.toBeUndefined()
  })

  it("Bun's WebSocket upgrade behind the wrapper: upgraded, echoing, no error; the third client gets 429", async () => {
    const script = join(import.meta.dirname, 'support', 'bun-websocket.mjs')
    const { stdout, stderr, code } = await new Promise<{
      stdout: string
      stderr: string
      code: number | null
    }>((resolve) => {
      execFile(
        join(root, 'node_modules', '.bin', 'bun'),
        // Its limiter counts on the system clock: a window whose end the run cannot cross.
        [script, farWindow()],
        { timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ stdout, stderr, code: error ? (error.code as number | null) : 0 }),
      )
    })
    expect(code, stderr).toBe(0)
    expect(JSON.parse(stdout.trim().split('\n')[0] as string)).toEqual({
      echoes: ['echo:hi', 'echo:hi'],
      denied: 429,
      errors: [],
    })
  })

  it('rejects bad options when created, not on the first request', () => {
    const handler = () => new Response()
    expect(() => withRateLimit(handler, {})).toThrow(ConfigError)
    expect(() => withRateLimit(handler, { limiter: onePerHour(), headers: ['draft-10', 'draft-7'] })).toThrow(
      ConfigError,
    )
    expect(() =>
      withRateLimit(handler, { limiter: onePerHour(), identity: { trustedProxies: ['10.0.0.0/33'] } }),
    ).toThrow(/identity\.trustedProxies\[0\]/)
  })
})

describe('option names, at creation in every adapter', () => {
  const typo = { limiter: onePerHour(), identity: { trustedProxy: ['10.0.0.0/8'] } } as never
  const refused = /identity\.trustedProxy: .*\[ERR_UNKNOWN_OPTION\]/

  it('an unknown name is refused by every adapter', async () => {
    expect(() => nodeRateLimit(typo)).toThrow(refused)
    expect(() => expressRateLimit(typo)).toThrow(refused)
    expect(() => honoRateLimit(typo)).toThrow(refused)
    expect(() => withRateLimit(() => new Response(), typo)).toThrow(refused)
    const app = Fastify()
    await expect(app.register(fastifyRateLimit, typo)).rejects.toThrow(refused)
    await app.close()
  })

  it("each adapter's own names are accepted where they belong", async () => {
    expect(() => withRateLimit(() => new Response(), { limiter: onePerHour(), peer: denoPeer })).not.toThrow()
    expect(() => honoRateLimit({ limiter: onePerHour(), peer: () => '192.0.2.1' })).not.toThrow()
    for (const make of [nodeRateLimit, expressRateLimit])
      expect(() => make({ limiter: onePerHour(), peer: () => '192.0.2.1' } as never)).toThrow(
        /peer: .*\[ERR_UNKNOWN_OPTION\]/,
      )
    // Fastify hands its register options (prefix, logLevel, logSerializers) to the plugin.
    const app = Fastify()
    await app.register(fastifyRateLimit, {
      limiter: onePerHour(),
      prefix: '/v1',
      logLevel: 'warn',
      logSerializers: {},
    })
    app.get('/', async () => 'ok')
    expect((await app.inject('/')).statusCode).toBe(200)
    expect((await app.inject('/')).statusCode).toBe(429)
    await app.close()
  })

  it('a peer that is not a function is refused at creation, not on every request', () => {
    // `peer` is called per request: anything but a function would fail every request (a 500).
    for (const peer of ['127.0.0.1', {}, null]) {
      const options = { limiter: onePerHour(), peer } as never
      expect(() => honoRateLimit(options)).toThrow(/peer: expected a function, .*\[ERR_FUNCTION\]/)
      expect(() => withRateLimit(() => new Response(), options)).toThrow(
        /peer: expected a function, .*\[ERR_FUNCTION\]/,
      )
    }
  })
})

describe('node and express adapters', () => {
  it('node, memory store: headers are set before it returns for a client seen before, not a new one', async () => {
    const limit = nodeRateLimit({
      limiter: createLimiter({ rules: [{ name: 'api', algorithm: gcra({ limit: 5, period: '1h' }) }] }),
    })
    const setBeforeReturn = async (peer: string) => {
      const set: string[] = []
      const res = { statusCode: 200, setHeader: (name: string) => set.push(name), end: () => undefined }
      const admitted = limit({ method: 'GET', url: '/', headers: {}, socket: { remoteAddress: peer } }, res)
      const before = set.includes('ratelimit')
      expect(await admitted).toBe(true)
      expect(set).toContain('ratelimit')
      return before
    }
    // A new address is hashed into its key asynchronously (Web Crypto) first.
    expect(await setBeforeReturn('192.0.2.1')).toBe(false)
    expect(await setBeforeReturn('192.0.2.1')).toBe(true)
    expect(await setBeforeReturn('192.0.2.2')).toBe(false)
  })

  it('node on an HTTP/2 compatibility server (as documented): its request and response fit, headers on 200 and 429', async () => {
    const limit = nodeRateLimit({ limiter: onePerHour() })
    const server = createHttp2Server(async (req, res) => {
      if (!(await limit(req, res))) return
      res.end('ok')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const client = connectHttp2(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    const get = () =>
      new Promise<[unknown, unknown, string]>((resolve, reject) => {
        const stream = client.request({ ':path': '/' })
        let body = ''
        let head: Record<string, unknown> = {}
        stream.on('response', (headers) => {
          head = headers
        })
        stream.on('data', (chunk) => {
          body += chunk
        })
        stream.on('end', () => resolve([head[':status'], head.ratelimit, body]))
        stream.on('error', reject)
      })
    try {
      expect(await get()).toEqual([200, '"hourly";r=0;t=3600', 'ok'])
      const [status, ratelimit, body] = await get()
      expect([status, ratelimit, JSON.parse(body).status]).toEqual([429, '"hourly";r=0;t=3600', 429])
    } finally {
      client.close()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('node behind a proxy on a Unix socket (as documented): no peer, so a hop count, not a CIDR, keys clients apart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'edgelimit-unix-'))
    const serveOn = async (socketPath: string, trustedProxies: readonly string[] | number) => {
      const limit = nodeRateLimit({ limiter: onePerHour(), identity: { trustedProxies } })
      const server = createServer(async (req, res) => {
        if (!(await limit(req, res))) return
        res.end(String(req.socket.remoteAddress))
      })
      await new Promise<void>((resolve) => server.listen(socketPath, resolve))
      // Two clients, one request each, through the proxy in front of the socket.
      const statuses: number[] = []
      for (const client of ['203.0.113.1', '203.0.113.2']) {
        statuses.push(
          await new Promise<number>((resolve, reject) => {
            httpRequest({ socketPath, path: '/', headers: { 'x-forwarded-for': client } }, (res) => {
              res.resume()
              res.on('end', () => resolve(res.statusCode ?? 0))
            })
              .on('error', reject)
              .end()
          }),
        )
      }
      await closeAll(server)
      return statuses
    }
    try {
      // No CIDR matches a peer without an address: both clients share the fallback key.
      expect(await serveOn(join(dir, 'cidr.sock'), ['127.0.0.1'])).toEqual([200, 429])
      expect(await serveOn(join(dir, 'hops.sock'), 1)).toEqual([200, 200])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('node: a failing key function rejects, for the server to handle', async () => {
    const limit = nodeRateLimit({
      limiter: onePerHour(),
      key: () => {
        throw new Error('no key')
      },
    })
    const res = { statusCode: 200, setHeader: () => undefined, end: () => undefined }
    await expect(limit({ method: 'GET', url: '/', headers: {} }, res)).rejects.toThrow('no key')
  })

  it('express: the problem names the full path under a mounted router; errors go to next(err)', async () => {
    const app = express()
    const router = express.Router()
    router.use(expressRateLimit({ limiter: onePerHour() }))
    router.get('/x', (_req, res) => {
      res.send('ok')
    })
    app.use('/api', router)
    app.use(
      expressRateLimit({
        limiter: onePerHour(),
        key: () => {
          throw new Error('no key')
        },
      }),
    )
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).send(`handled: ${error.message}`)
    })
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
    try {
      expect((await fetch(`${base}/api/x`)).status).toBe(200)
      const denied = await fetch(`${base}/api/x?q=1`)
      expect(denied.status).toBe(429)
      expect((await denied.json()).instance).toBe('/api/x')
      const failed = await fetch(`${base}/other`)
      expect([failed.status, await failed.text()]).toEqual([500, 'handled: no key'])
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('a head an earlier middleware sent (res.flushHeaders()): an admitted request goes on, without the fields', async () => {
    const errors: unknown[] = []
    const app = express()
    app.use((_req, res, next) => {
      res.flushHeaders()
      next()
    })
    app.use(expressRateLimit({ limiter: onePerHour() }))
    app.get('/', (_req, res) => {
      res.end('ok')
    })
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error)
      res.end('failed')
    })
    const limit = nodeRateLimit({ limiter: onePerHour() })
    const node = createServer((req, res) => {
      res.flushHeaders()
      limit(req, res).then(
        (go) => res.end(go ? 'ok' : ''),
        (error: unknown) => {
          errors.push(error)
          res.end('failed')
        },
      )
    })
    const servers = [createServer(app), node]
    try {
      for (const server of servers) {
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
        const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
        // The head went out before the limiter ran: too late for its fields, not an error.
        expect([res.status, await res.text(), res.headers.get('ratelimit')]).toEqual([200, 'ok', null])
      }
      expect(errors).toEqual([])
    } finally {
      await Promise.all(servers.map(closeAll))
    }
  })
})

describe('one middleware mounted twice on a path counts a request once', () => {
  /** Two requests to `/api/x`: the first admitted and counted once, the second denied. */
  async function twice(get: () => Promise<Response>): Promise<void> {
    const first = await get()
    expect([first.status, await first.text()]).toEqual([200, 'ok'])
    // One member, not one per pass: `"hourly";r=1;t=3600, "hourly";r=0;t=7200` was two charges.
    expect([first.headers.get('ratelimit'), first.headers.get('ratelimit-policy')]).toEqual([
      '"hourly";r=1;t=3600',
      '"hourly";q=2;w=7200',
    ])
    const second = await get()
    expect([second.status, second.headers.get('ratelimit')]).toEqual([200, '"hourly";r=0;t=7200'])
    expect((await get()).status).toBe(429)
  }
  const twoPerHour = () =>
    createLimiter({
      rules: [{ name: 'hourly', algorithm: gcra({ limit: 1, period: '1h', burst: 2 }) }],
      clock: manualClock(0),
    })

  it('express: on the app and on a router mounted at /api', async () => {
    const limit = expressRateLimit({ limiter: twoPerHour() })
    const app = express()
    app.use(limit)
    const api = express.Router()
    api.use(limit)
    api.get('/x', (_req, res) => {
      res.send('ok')
    })
    app.use('/api', api)
    const server = createServer(app)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      await twice(() => fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/x`))
    } finally {
      await closeAll(server)
    }
  })

  /** `limit` on the app, on `/api/*`, and in a sub-app routed at `/api`. */
  const honoApp = (limit: ReturnType<typeof honoRateLimit>) => {
    const api = new Hono().use(limit).get('/x', (c) => c.text('ok'))
    return new Hono().use(limit).use('/api/*', limit).route('/api', api)
  }

  it('hono on @hono/node-server: on the app, on /api/*, in a sub-app', async () => {
    const app = honoApp(honoRateLimit({ limiter: twoPerHour() }))
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server))
    })
    try {
      await twice(() => fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/x`))
    } finally {
      await closeAll(server)
    }
  })

  it('hono on other runtimes: on the app, on /api/*, in a sub-app', async () => {
    const app = honoApp(honoRateLimit({ limiter: twoPerHour(), peer: () => '192.0.2.1' }))
    await twice(async () => app.request('/api/x'))
  })
})

describe('two limiters on one request: the client is told of both draft-10 policies, in every adapter', () => {
  const limiter = (name: string, limit: number) =>
    createLimiter({ rules: [{ name, algorithm: gcra({ limit, period: '1h' }) }], clock: manualClock(0) })
  /** An app-wide limit of 5 per hour, then a stricter 3 per hour on the route. */
  const both = () => [{ limiter: limiter('global', 5) }, { limiter: limiter('local', 3) }] as const
  /** A list field's members, in order of name: the adapters list them in different orders. */
  const members = (field: string | null) => field?.split(', ').sort()

  /** Four requests to `/`: the first admitted by both, the fourth denied by the stricter. */
  async function toldOfBoth(get: () => Promise<{ status: number; headers: Headers }>): Promise<void> {
    const first = await get()
    expect(first.status).toBe(200)
    expect([members(first.headers.get('ratelimit-policy')), members(first.headers.get('ratelimit'))]).toEqual(
      [
        ['"global";q=5;w=3600', '"local";q=3;w=3600'],
        ['"global";r=4;t=720', '"local";r=2;t=1200'],
      ],
    )
    await get()
    await get()
    // The 429 is the stricter limiter's, and still tells of the other's policy and state.
    const denied = await get()
    expect([denied.status, denied.headers.get('retry-after')]).toEqual([429, '1200'])
    expect([
      members(denied.headers.get('ratelimit-policy')),
      members(denied.headers.get('ratelimit')),
    ]).toEqual([
      ['"global";q=5;w=3600', '"local";q=3;w=3600'],
      ['"global";r=1;t=2880', '"local";r=0;t=1200'],
    ])
  }

  /** Serves `server` on loopback for `toldOfBoth`, then closes it. */
  async function over(server: Server): Promise<void> {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      await toldOfBoth(() => fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`))
    } finally {
      await closeAll(server)
    }
  }

  it('node', async () => {
    const [outer, inner] = both().map(nodeRateLimit)
    const server = createServer(async (req, res) => {
      if ((await outer?.(req, res)) && (await inner?.(req, res))) res.end('ok')
    })
    await over(server)
  })

  it('express', async () => {
    const [outer, inner] = both()
    const app = express()
    app.use(expressRateLimit(outer))
    app.get('/', expressRateLimit(inner), (_req, res) => {
      res.send('ok')
    })
    await over(createServer(app))
  })

  it('fastify', async () => {
    const [outer, inner] = both()
    const app = Fastify()
    await app.register(fastifyRateLimit, outer)
    await app.register(async (scope) => {
      await scope.register(fastifyRateLimit, inner)
      scope.get('/', async () => 'ok')
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      await toldOfBoth(() => fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/`))
    } finally {
      await app.close()
    }
  })

  const honoApp = (peer?: () => string) => {
    const [outer, inner] = both()
    return new Hono()
      .use(honoRateLimit({ ...outer, ...(peer ? { peer } : {}) }))
      .use(honoRateLimit({ ...inner, ...(peer ? { peer } : {}) }))
      .get('/', (c) => c.text('ok'))
  }

  it('hono on @hono/node-server', async () => {
    const app = honoApp()
    await over(createAdaptorServer({ fetch: app.fetch }) as Server)
  })

  it('hono on other runtimes', async () => {
    const app = honoApp(() => '192.0.2.1')
    await toldOfBoth(async () => app.request('/'))
  })

  it('fetch', async () => {
    const [outer, inner] = both()
    const handler = withRateLimit(
      withRateLimit(() => new Response('ok'), inner),
      outer,
    )
    await toldOfBoth(() => handler(req()))
  })
})

describe('route spellings over real HTTP', () => {
  /** One raw request line to a local port; resolves with the status code. */
  function rawStatus(port: number, method: string, target: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(`${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`),
      )
      let data = ''
      socket.setEncoding('latin1')
      socket.on('data', (chunk: string) => {
        data += chunk
      })
      socket.on('error', reject)
      socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1])))
    })
  }

  it('express: every spelling Express routes to /login counts against the /login route', async () => {
    const app = express()
    app.use(expressRateLimit({ routes: [{ path: '/login', methods: ['POST'], limiter: onePerHour() }] }))
    app.post('/login', (_req, res) => {
      res.send('ok')
    })
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    const port = (server.address() as { port: number }).port
    try {
      const statuses = []
      for (const target of ['/login', '/LOGIN', '/login/', `http://127.0.0.1:${port}/login`, '/login?x=1'])
        statuses.push(await rawStatus(port, 'POST', target))
      // Express routes all five to the handler: the first is admitted, the rest are the same route.
      expect(statuses).toEqual([200, 429, 429, 429, 429])
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('express: routes match the path Express routes (after a URL rewrite), the full path under a mounted router', async () => {
    const app = express()
    // Rewrite middleware before the limiter: an API version prefix is stripped.
    app.use((req, _res, next) => {
      req.url = req.url.replace(/^\/v1(?=\/)/, '')
      next()
    })
    app.use(expressRateLimit({ routes: [{ path: '/login', methods: ['POST'], limiter: onePerHour() }] }))
    app.post('/login', (_req, res) => {
      res.send('ok')
    })
    // A limiter on a router mounted at /auth: its rules name the full path.
    const auth = express.Router()
    auth.use(
      expressRateLimit({
        routes: [
          { path: '/token', limiter: onePerHour('relative') },
          { path: '/auth/token', limiter: onePerHour('full') },
        ],
      }),
    )
    auth.post('/token', (_req, res) => {
      res.send('ok')
    })
    app.use('/auth', auth)
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    const port = (server.address() as { port: number }).port
    try {
      const statuses = []
      for (const target of ['/v1/login', '/login', '/v1/login'])
        statuses.push(await rawStatus(port, 'POST', target))
      expect(statuses).toEqual([200, 429, 429])
      // The problem names the path the client sent.
      const denied = await fetch(`http://127.0.0.1:${port}/v1/login`, { method: 'POST' })
      expect((await denied.json()).instance).toBe('/v1/login')

      const first = await fetch(`http://127.0.0.1:${port}/auth/token`, { method: 'POST' })
      expect([first.status, first.headers.get('ratelimit')]).toEqual([200, '"full";r=0;t=3600'])
      const targets = ['/auth/token', `http://127.0.0.1:${port}/auth/token?x=1`]
      const again = []
      for (const target of targets) again.push(await rawStatus(port, 'POST', target))
      expect(again).toEqual([429, 429])
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  // With the option (Fastify 4's default) Fastify routes `/login;x` to /login; without it, not.
  it.each([true, false])(
    'fastify, useSemicolonDelimiter: %s: /login;x counts against the /login route either way',
    async (useSemicolonDelimiter) => {
      // find-my-way's types omit the option (the top-level one is deprecated in Fastify 5).
      const app = Fastify({
        routerOptions: { useSemicolonDelimiter } as FastifyServerOptions['routerOptions'],
      })
      await app.register(fastifyRateLimit, {
        routes: [{ path: '/login', methods: ['POST'], limiter: onePerHour() }],
      })
      app.post('/login', async () => 'ok')
      await app.listen({ port: 0, host: '127.0.0.1' })
      const port = (app.server.address() as { port: number }).port
      try {
        const statuses = []
        for (const target of ['/login;a', '/login;b', '/login', '/LOGIN;/', '/login?x;y'])
          statuses.push(await rawStatus(port, 'POST', target))
        // Counted alike whether this instance routes `;x` away or not: matching more is the safe side.
        expect(statuses).toEqual([useSemicolonDelimiter ? 200 : 404, 429, 429, 429, 429])
        // The problem names the path as sent.
        const denied = await app.inject({ method: 'POST', url: '/login;b' })
        expect(denied.json().instance).toBe('/login;b')
      } finally {
        await app.close()
      }
    },
  )
})

describe('fastify adapter', () => {
  it('registered at the root, it covers root routes and routes of encapsulated plugins', async () => {
    const app = Fastify()
    await app.register(fastifyRateLimit, { limiter: onePerHour() })
    app.get('/root', async () => 'root')
    await app.register(async (child) => {
      child.get('/child', async () => 'child')
    })
    expect((await app.inject('/root')).headers.ratelimit).toBe('"hourly";r=0;t=3600')
    const denied = await app.inject('/child')
    expect(denied.statusCode).toBe(429)
    expect(denied.json().instance).toBe('/child')
    await app.close()
  })

  it('registered in a plugin, it covers that plugin only', async () => {
    const app = Fastify()
    await app.register(async (api) => {
      await api.register(fastifyRateLimit, { limiter: onePerHour() })
      api.get('/api', async () => 'api')
    })
    app.get('/open', async () => 'open')
    expect((await app.inject('/api')).statusCode).toBe(200)
    expect((await app.inject('/api')).statusCode).toBe(429)
    const open = await app.inject('/open')
    expect([open.statusCode, open.headers.ratelimit]).toEqual([200, undefined])
    await app.close()
  })

  it('a route that hijacks the reply and writes reply.raw still sends the rate-limit headers', async () => {
    const app = Fastify()
    // One bucket per path: each route's first request is admitted.
    await app.register(fastifyRateLimit, { limiter: onePerHour(), key: (request) => request.path })
    app.get('/events', async (_request, reply) => {
      reply.hijack()
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream' })
      reply.raw.end('data: hello\n\n')
    })
    // The route's own fields win, as with reply.header; reply.removeHeader still removes ours.
    app.get('/own', async (_request, reply) => {
      reply.removeHeader('ratelimit-policy')
      reply.hijack()
      reply.raw.writeHead(200, { ratelimit: 'mine' })
      reply.raw.end('own')
    })
    app.get('/removed', async (_request, reply) => {
      reply.removeHeader('ratelimit')
      return 'removed'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
    try {
      const events = await fetch(`${base}/events`)
      expect([events.status, await events.text()]).toEqual([200, 'data: hello\n\n'])
      expect(events.headers.get('content-type')).toBe('text/event-stream')
      expect(events.headers.get('ratelimit')).toBe('"hourly";r=0;t=3600')
      expect(events.headers.get('ratelimit-policy')).toBe('"hourly";q=1;w=3600')
      const own = await fetch(`${base}/own`)
      expect([own.headers.get('ratelimit'), own.headers.get('ratelimit-policy')]).toEqual(['mine', null])
      const removed = await app.inject('/removed')
      expect([removed.statusCode, removed.headers.ratelimit]).toEqual([200, undefined])
    } finally {
      await app.close()
    }
  })

  it('a route that writes reply.raw and then hijacks (an SSE stream) is not broken by the fields', async () => {
    const app = Fastify()
    const errors: string[] = []
    app.setErrorHandler((error, request, reply) => {
      errors.push(`${request.url}: ${(error as { code?: string }).code}`)
      reply.code(500).send('error')
    })
    await app.register(fastifyRateLimit, { limiter: onePerHour(), key: (request) => request.path })
    app.get('/stream', (_request, reply) => {
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream' })
      reply.raw.write('data: 1\n\n')
      reply.hijack()
      reply.raw.end('data: 2\n\n')
    })
    app.get('/ended', async (_request, reply) => {
      reply.raw.writeHead(200)
      reply.raw.end('ended')
      reply.hijack()
    })
    // A field the route set to a value Node refuses: that one is not copied, the others are.
    app.get('/garbled', (_request, reply) => {
      reply.header('ratelimit', 'bad\nvalue')
      reply.hijack()
      reply.raw.writeHead(200)
      reply.raw.end('garbled')
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
    try {
      // The head went before the hijack: too late for the fields, and the stream goes on.
      const stream = await fetch(`${base}/stream`)
      expect([stream.status, await stream.text()]).toEqual([200, 'data: 1\n\ndata: 2\n\n'])
      expect([stream.headers.get('content-type'), stream.headers.get('ratelimit')]).toEqual([
        'text/event-stream',
        null,
      ])
      const ended = await fetch(`${base}/ended`)
      expect([ended.status, await ended.text()]).toEqual([200, 'ended'])
      const garbled = await fetch(`${base}/garbled`)
      expect([garbled.status, await garbled.text()]).toEqual([200, 'garbled'])
      expect([garbled.headers.get('ratelimit'), garbled.headers.get('ratelimit-policy')]).toEqual([
        null,
        '"hourly";q=1;w=3600',
      ])
      expect(errors).toEqual([])
    } finally {
      await app.close()
    }
  })

  it('with rewriteUrl: routes match the path Fastify routes, the problem names the path as sent', async () => {
    // An API version prefix stripped before routing, as Express's rewrite middleware does.
    const app = Fastify({ rewriteUrl: (raw) => (raw.url ?? '/').replace(/^\/v1(?=\/)/, '') })
    await app.register(fastifyRateLimit, { routes: [{ path: '/login', limiter: onePerHour() }] })
    app.get('/login', async () => 'ok')
    try {
      expect((await app.inject('/v1/login')).statusCode).toBe(200)
      const statuses = []
      const instances = []
      for (const url of ['/login', '/v1/login?x=1', '/v1/login;a']) {
        const denied = await app.inject(url)
        statuses.push(denied.statusCode)
        instances.push(denied.json().instance)
      }
      expect(statuses).toEqual([429, 429, 429])
      expect(instances).toEqual(['/login', '/v1/login', '/v1/login;a'])
    } finally {
      await app.close()
    }
  })

  it('a failing check becomes a Fastify error (500)', async () => {
    const app = Fastify()
    await app.register(fastifyRateLimit, {
      limiter: onePerHour(),
      key: () => {
        throw new Error('no key')
      },
    })
    app.get('/', async () => 'ok')
    expect((await app.inject('/')).statusCode).toBe(500)
    await app.close()
  })
})

describe('hono adapter', () => {
  it('uses the peer option, and adds headers to immutable and error responses', async () => {
    const app = new Hono()
    app.use(honoRateLimit({ limiter: onePerHour(), peer: (c) => c.req.header('x-test-peer') }))
    app.get('/redirect', () => Response.redirect('http://127.0.0.1/next', 302))
    app.get('/boom', () => {
      throw new Error('boom')
    })
    app.onError((_error, c) => c.text('failed', 500))
    const as = (peer: string, path: string) => app.request(path, { headers: { 'x-test-peer': peer } })

    const redirect = await as('192.0.2.1', '/redirect')
    expect([redirect.status, redirect.headers.get('ratelimit')]).toEqual([302, '"hourly";r=0;t=3600'])
    expect((await as('192.0.2.1', '/redirect')).status).toBe(429)
    const boom = await as('192.0.2.2', '/boom')
    expect([boom.status, boom.headers.get('ratelimit')]).toEqual([500, '"hourly";r=0;t=3600'])
  })

  it('adds to the draft-10 fields of a response that carries its own, keeps its other forms (draft-10 §7.2)', async () => {
    const app = new Hono()
    app.use(
      honoRateLimit({ limiter: onePerHour(), headers: ['draft-10', 'legacy'], peer: () => '192.0.2.1' }),
    )
    // A proxied upstream's response: the same policy as ours (the first field), its own state.
    const upstream = {
      'RateLimit-Policy': '"hourly";q=1;w=3600',
      RateLimit: '"hourly";r=7;t=1',
      'X-RateLimit-Limit': '1',
      'X-RateLimit-Remaining': '7',
    }
    app.get('/', () => new Response('upstream', { headers: upstream }))
    // A handler that sets one of the fields itself, on Hono's own response.
    app.get('/own', (c) => {
      c.header('RateLimit', '"app";r=0;t=60')
      return c.text('own')
    })
    const res = await app.request('/')
    expect(res.status).toBe(200)
    expect(res.headers.get('ratelimit-policy')).toBe('"hourly";q=1;w=3600')
    expect(res.headers.get('ratelimit')).toBe('"hourly";r=7;t=1, "hourly";r=0;t=3600')
    // The legacy group is the upstream's, whole: no reset of ours beside its remaining.
    expect(res.headers.get('x-ratelimit-limit')).toBe('1')
    expect(res.headers.get('x-ratelimit-remaining')).toBe('7')
    expect(res.headers.get('x-ratelimit-reset')).toBeNull()
    const own = await new Hono()
      .use(honoRateLimit({ limiter: onePerHour(), peer: () => '192.0.2.1' }))
      .get('/', (c) => {
        c.header('RateLimit', '"app";r=0;t=60')
        return c.text('own')
      })
      .request('/')
    expect([own.headers.get('ratelimit'), own.headers.get('ratelimit-policy')]).toEqual([
      '"app";r=0;t=60, "hourly";r=0;t=3600',
      '"hourly";q=1;w=3600',
    ])
  })

  it("leaves a response's draft-7 fields as they are: ours are not appended to another form", async () => {
    const draft7 = { RateLimit: 'limit=10, remaining=0, reset=9', 'RateLimit-Policy': '10;w=60' }
    const app = new Hono()
      // A client each: one request per hour.
      .use(
        honoRateLimit({
          limiter: onePerHour(),
          peer: (c) => (c.req.path === '/' ? '192.0.2.1' : '192.0.2.2'),
        }),
      )
      .get('/', () => new Response('upstream', { headers: draft7 }))
      .get('/own', (c) => {
        c.header('RateLimit', draft7.RateLimit)
        c.header('RateLimit-Policy', draft7['RateLimit-Policy'])
        return c.text('own')
      })
    for (const path of ['/', '/own']) {
      const res = await app.request(path)
      expect([res.headers.get('ratelimit'), res.headers.get('ratelimit-policy')]).toEqual([
        'limit=10, remaining=0, reset=9',
        '10;w=60',
      ])
    }
  })
})

describe('shaping: a held request whose client leaves is dropped, not handed on', () => {
  /** A shaping queue of 5 on a frozen clock, one request per `leakInterval`. */
  const shapedEvery = (leakInterval: Duration) =>
    createLimiter({
      rules: [
        { name: 'smooth', algorithm: leakyBucket({ capacity: 5, leakRate: 1, leakInterval, mode: 'shape' }) },
      ],
      clock: manualClock(0),
    })
  // Delays 0, 300 and 600 ms.
  const shaped = () => shapedEvery('300ms')

  /** A server per adapter, serving `/` with `handled()`; `server` is its `node:http` server. */
  const targets: {
    name: string
    start(
      handled: () => void,
      proceeded: (go: boolean) => void,
      limiter?: Limiter,
    ): Promise<{ server: Server; close(): Promise<unknown> }>
  }[] = [
    {
      name: 'node',
      async start(handled, proceeded, limiter = shaped()) {
        const limit = nodeRateLimit({ limiter })
        const server = createServer(async (req, res) => {
          const go = await limit(req, res)
          proceeded(go)
          if (!go) return
          handled()
          res.end('ok')
        })
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
        return { server, close: () => closeAll(server) }
      },
    },
    {
      name: 'express',
      async start(handled, _proceeded, limiter = shaped()) {
        const app = express()
        app.use(expressRateLimit({ limiter }))
        app.get('/', (_req, res) => {
          handled()
          res.send('ok')
        })
        const server = createServer(app)
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
        return { server, close: () => closeAll(server) }
      },
    },
    {
      name: 'fastify',
      async start(handled, _proceeded, limiter = shaped()) {
        const app = Fastify()
        await app.register(fastifyRateLimit, { limiter })
        app.get('/', async () => {
          handled()
          return 'ok'
        })
        await app.listen({ port: 0, host: '127.0.0.1' })
        return { server: app.server, close: () => app.close() }
      },
    },
    {
      name: 'hono (@hono/node-server)',
      async start(handled, _proceeded, limiter = shaped()) {
        const app = new Hono()
        app.use(honoRateLimit({ limiter }))
        app.get('/', (c) => {
          handled()
          return c.text('ok')
        })
        const server = await new Promise<Server>((resolve) => {
          const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server))
        })
        return { server, close: () => closeAll(server) }
      },
    },
  ]

  it.each(targets)('$name', async (target) => {
    let handled = 0
    const proceeded: boolean[] = []
    const { server, close } = await target.start(
      () => handled++,
      (go) => proceeded.push(go),
    )
    const { port } = server.address() as AddressInfo
    try {
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200)
      // The second request, held 300 ms: its client leaves as soon as the server has it.
      const arrived = new Promise((resolve) => server.once('request', resolve))
      const socket = connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'))
      socket.on('error', () => {})
      await arrived
      socket.destroy()
      // The third, held 600 ms: when it is answered, the second's hold has ended.
      const third = await fetch(`http://127.0.0.1:${port}/`)
      expect([third.status, await third.text()]).toEqual([200, 'ok'])
      expect(handled).toBe(2)
      if (target.name === 'node') expect(proceeded).toEqual([true, false, true])
    } finally {
      await close()
    }
  })

  // The second is held 30 days, past the 2^31 - 1 ms (about 24.8 days) a timer takes, which Node
  // (like browsers and Deno) fires at once instead.
  const monthly = () => shapedEvery('30d')

  it.each(targets)(
    '$name: a hold longer than a timer takes is held, not handed on at once',
    async (target) => {
      let handled = 0
      const { server, close } = await target.start(
        () => handled++,
        () => {},
        monthly(),
      )
      const { port } = server.address() as AddressInfo
      try {
        expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200)
        let answer = ''
        const arrived = new Promise((resolve) => server.once('request', resolve))
        const socket = connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'))
        socket.on('error', () => {})
        socket.on('data', (chunk) => {
          answer += chunk
        })
        await arrived
        // A timer armed after the hold's: an overflowed hold (fired after 1 ms) has run by then.
        await new Promise((resolve) => setTimeout(resolve, 50))
        socket.destroy()
        expect([handled, answer]).toEqual([1, ''])
      } finally {
        await close()
      }
    },
  )

  /** A fetch handler behind `limiter` that counts its runs (`handled()`), for one client. */
  const countingFetch = (limiter: Limiter) => {
    let handled = 0
    const handler = withRateLimit(
      () => {
        handled++
        return new Response('ok')
      },
      { limiter, peer: () => '192.0.2.1' },
    )
    return { handler, handled: () => handled }
  }

  it('fetch: a hold longer than a timer takes is held, not handed on at once', async () => {
    const { handler, handled } = countingFetch(monthly())
    expect((await handler(new Request('http://127.0.0.1/'))).status).toBe(200)
    let answered = false
    handler(new Request('http://127.0.0.1/')).then(() => {
      answered = true
    })
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect([handled(), answered]).toEqual([1, false])
  })

  it('node on an HTTP/2 compatibility server: a held stream the client cancels resolves false', async () => {
    let handled = 0
    const proceeded: boolean[] = []
    const limit = nodeRateLimit({ limiter: shaped() })
    const server = createHttp2Server(async (req, res) => {
      const go = await limit(req, res)
      proceeded.push(go)
      if (!go) return
      handled++
      res.end('ok')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const client = connectHttp2(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    const get = () =>
      new Promise<number>((resolve, reject) => {
        const stream = client.request({ ':path': '/' })
        stream.on('response', (headers) => resolve(headers[':status'] as number))
        stream.on('error', reject)
        stream.resume()
      })
    try {
      expect(await get()).toBe(200)
      // The second request, held 300 ms: its client cancels the stream as soon as the server has it.
      const arrived = new Promise((resolve) => server.once('request', resolve))
      const cancelled = client.request({ ':path': '/' })
      cancelled.on('error', () => {})
      await arrived
      cancelled.close(http2Constants.NGHTTP2_CANCEL)
      // The third, held 600 ms: when it is answered, the second's hold has ended.
      expect(await get()).toBe(200)
      expect([handled, proceeded]).toEqual([2, [true, false, true]])
    } finally {
      client.close()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('fetch (the request signal): a held request whose signal aborts gets no handler, and a 499', async () => {
    const { handler, handled } = countingFetch(shaped())
    expect((await handler(new Request('http://127.0.0.1/'))).status).toBe(200)
    const gone = new AbortController()
    const held = handler(new Request('http://127.0.0.1/', { signal: gone.signal }))
    gone.abort()
    expect((await held).status).toBe(499)
    expect([(await handler(new Request('http://127.0.0.1/'))).status, handled()]).toEqual([200, 2])
  })

  it('hono on other runtimes (the request signal): a held request whose signal aborts gets no handler', async () => {
    let handled = 0
    const app = new Hono()
    app.use(honoRateLimit({ limiter: shaped(), peer: () => '192.0.2.1' }))
    app.get('/', (c) => {
      handled++
      return c.text('ok')
    })
    expect((await app.request('/')).status).toBe(200)
    const gone = new AbortController()
    const held = app.request(new Request('http://127.0.0.1/', { signal: gone.signal }))
    gone.abort()
    expect((await held).status).toBe(499)
    expect([(await app.request('/')).status, handled]).toEqual([200, 2])
  })
})

describe('a check that fails with a value that is not an Error still goes to the error path', () => {
  // What Express takes for "no error" (or for an order: 'route', 'router') and Fastify for "go on".
  const failures: [string, Partial<RateLimitOptions>][] = [
    [
      'a key function that throws undefined',
      {
        key: () => {
          throw undefined
        },
      },
    ],
    ['a key function that rejects with no reason', { key: () => Promise.reject() }],
    [
      'a skip function that throws null',
      {
        skip: () => {
          throw null
        },
      },
    ],
    ['a cost function that rejects with ""', { cost: () => Promise.reject('') }],
    [
      "a key function that throws 'route'",
      {
        key: () => {
          throw 'route'
        },
      },
    ],
    [
      "a key function that throws 'router'",
      {
        key: () => {
          throw 'router'
        },
      },
    ],
    // Hono hands only an Error to onError: a plain object rejected app.request() as it was.
    [
      'a key function that throws a plain object',
      {
        key: () => {
          throw { message: 'plain object' }
        },
      },
    ],
  ]
  /** What an app saw: requests its route handled, errors its error handler got. */
  interface Seen {
    handled: number
    errors: unknown[]
  }
  /** One request to the app: its error handler answered (500), the route never ran, the error is coded. */
  async function answeredByErrorHandler(server: Server, seen: Seen): Promise<void> {
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
      expect([res.status, await res.text(), seen.handled]).toEqual([500, 'failed', 0])
      expect(seen.errors).toEqual([expect.objectContaining({ code: 'ERR_EDGELIMIT_THROWN' })])
    } finally {
      await closeAll(server)
    }
  }

  it.each(failures)('express: %s', async (_name, options) => {
    const seen: Seen = { handled: 0, errors: [] }
    const app = express()
    const router = express.Router()
    router.use(expressRateLimit({ limiter: onePerHour(), ...options }))
    router.get('/', (_req, res) => {
      seen.handled++
      res.send('ok')
    })
    app.use(router)
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      seen.errors.push(error)
      res.status(500).send('failed')
    })
    const server = createServer(app)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    await answeredByErrorHandler(server, seen)
  })

  it.each(failures)('hono (@hono/node-server): %s reaches app.onError', async (_name, options) => {
    const seen: Seen = { handled: 0, errors: [] }
    const app = new Hono()
    app.use(honoRateLimit({ limiter: onePerHour(), ...options }))
    app.get('/', (c) => {
      seen.handled++
      return c.text('ok')
    })
    app.onError((error, c) => {
      seen.errors.push(error)
      return c.text('failed', 500)
    })
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server))
    })
    await answeredByErrorHandler(server, seen)
  })

  it.each(failures)('fastify: %s', async (_name, options) => {
    let handled = 0
    const app = Fastify()
    await app.register(fastifyRateLimit, { limiter: onePerHour(), ...options })
    app.get('/', async () => {
      handled++
      return 'ok'
    })
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const res = await fetch(url)
      expect([res.status, (await res.json()).code, handled]).toEqual([500, 'ERR_EDGELIMIT_THROWN', 0])
    } finally {
      await app.close()
    }
  })
})
