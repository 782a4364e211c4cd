// A cost function (or onLimited) that returns garbage must not crash the server or leave the
// request hanging: every adapter hands the coded error to its framework's error path, and the next
// request is served normally (nothing was charged).
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { describe, expect, it } from 'vitest'
import { expressRateLimit } from '../../src/adapters/express.js'
import { fastifyRateLimit } from '../../src/adapters/fastify.js'
import { withRateLimit } from '../../src/adapters/fetch.js'
import { honoRateLimit } from '../../src/adapters/hono.js'
import { nodeRateLimit } from '../../src/adapters/node.js'
import type { HttpAnswer, HttpRequest, RateLimitOptions } from '../../src/http/rate-limit.js'
import { createLimiter, EdgelimitError, gcra } from '../../src/index.js'
import { manualClock } from '../../src/testing/index.js'

/** One request per hour; `/bad` costs 1.5. */
function options(): RateLimitOptions {
  return {
    limiter: createLimiter({
      rules: [{ name: 'hourly', algorithm: gcra({ limit: 1, period: '1h' }) }],
      clock: manualClock(0),
    }),
    cost: (request: HttpRequest) => (request.path === '/bad' ? 1.5 : 1),
  }
}

const COST_ERROR =
  /^The cost function returned 1\.5 \(number\) for GET \/bad; expected a non-negative integer/

/** What the framework's error handler saw. */
const seen: unknown[] = []
function codeOf(error: unknown): string {
  seen.push(error)
  return error instanceof EdgelimitError ? `${error.code}: ${error.message}` : String(error)
}

async function serve(server: Server): Promise<{
  get(path: string): Promise<[number, string]>
  raw(path: string): Promise<Response>
  close(): Promise<void>
}> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    async get(path) {
      // A hung request fails the test instead of stalling it.
      const res = await fetch(base + path, { signal: AbortSignal.timeout(2000) })
      return [res.status, await res.text()]
    },
    raw: (path) => fetch(base + path, { signal: AbortSignal.timeout(2000) }),
    close: () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

/** Node http: the promise's rejection answered with a 500 by the server itself. */
function nodeServer(options: RateLimitOptions) {
  const limit = nodeRateLimit(options)
  return serve(
    createServer((req, res) => {
      limit(req, res).then(
        (proceed) => {
          if (proceed) res.end('ok')
        },
        (error) => {
          res.statusCode = 500
          res.end(codeOf(error))
        },
      )
    }),
  )
}

/** Express: an error middleware answers what reaches next(err). */
function expressServer(options: RateLimitOptions) {
  const app = express()
  app.use(expressRateLimit(options))
  app.get('/', (_req, res) => {
    res.send('ok')
  })
  app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).send(codeOf(error))
  })
  return serve(createServer(app))
}

/** Fastify: its error handler answers. */
async function fastifyApp(options: RateLimitOptions) {
  const app = Fastify()
  app.setErrorHandler((error, _request, reply) => {
    reply.code(500).send(codeOf(error))
  })
  await app.register(fastifyRateLimit, options)
  app.get('/*', async () => 'ok')
  return app
}

/** Hono: app.onError answers. */
function honoApp(options: RateLimitOptions) {
  const app = new Hono()
  app.use(honoRateLimit({ ...options, peer: () => '192.0.2.1' }))
  app.get('*', (c) => c.text('ok'))
  app.onError((error, c) => c.text(codeOf(error), 500))
  return app
}

describe('a cost function returning an invalid cost', () => {
  it('node: the promise rejects with ERR_EDGELIMIT_COST; the server answers its own 500', async () => {
    const s = await nodeServer(options())
    try {
      const [status, body] = await s.get('/bad')
      expect(status).toBe(500)
      expect(body).toMatch(/^ERR_EDGELIMIT_COST: The cost function returned 1\.5/)
      expect(await s.get('/')).toEqual([200, 'ok'])
      expect((await s.get('/'))[0]).toBe(429)
    } finally {
      await s.close()
    }
  })

  it('express: the error goes to next(err)', async () => {
    const s = await expressServer(options())
    try {
      const [status, body] = await s.get('/bad')
      expect([status, body.replace(/^ERR_EDGELIMIT_COST: /, '')]).toEqual([
        500,
        expect.stringMatching(COST_ERROR),
      ])
      expect(await s.get('/')).toEqual([200, 'ok'])
    } finally {
      await s.close()
    }
  })

  it('fastify: the error becomes a Fastify error (its error handler, a 500)', async () => {
    const app = await fastifyApp(options())
    const bad = await app.inject('/bad')
    expect([bad.statusCode, bad.body]).toEqual([500, expect.stringMatching(/^ERR_EDGELIMIT_COST: The cost/)])
    expect((await app.inject('/')).statusCode).toBe(200)
    await app.close()
  })

  it('hono: the error reaches app.onError', async () => {
    const app = honoApp(options())
    const bad = await app.request('/bad')
    expect([bad.status, await bad.text()]).toEqual([
      500,
      expect.stringMatching(/^ERR_EDGELIMIT_COST: The cost/),
    ])
    expect((await app.request('/')).status).toBe(200)
  })

  it('fetch: the wrapped handler rejects, for the runtime to answer 500', async () => {
    const handler = withRateLimit(() => new Response('ok'), { ...options(), peer: () => '192.0.2.1' })
    await expect(handler(new Request('http://127.0.0.1/bad'))).rejects.toMatchObject({
      code: 'ERR_EDGELIMIT_COST',
      message: expect.stringMatching(COST_ERROR),
    })
    expect((await handler(new Request('http://127.0.0.1/'))).status).toBe(200)
    expect(seen.every((error) => error instanceof EdgelimitError)).toBe(true)
  })
})

// An onLimited answer that is not an HttpAnswer (here a Web Response, what fetch and Hono users
// reach for) is refused with ERR_EDGELIMIT_ON_LIMITED on every adapter's error path.
describe('an onLimited answer that is not an HttpAnswer', () => {
  /** One request per hour, then a Response from onLimited. */
  function refused(): RateLimitOptions {
    return {
      limiter: createLimiter({
        rules: [{ name: 'hourly', algorithm: gcra({ limit: 1, period: '1h' }) }],
        clock: manualClock(0),
      }),
      onLimited: () => new Response('slow down', { status: 429 }) as unknown as HttpAnswer,
    }
  }
  const ON_LIMITED =
    /^ERR_EDGELIMIT_ON_LIMITED: The onLimited function returned an object for GET \/; expected nothing or an HttpAnswer$/

  it.each([
    ['node: the promise rejects', nodeServer],
    ['express: next(err)', expressServer],
  ])('%s', async (_name, server) => {
    const s = await server(refused())
    try {
      expect(await s.get('/')).toEqual([200, 'ok'])
      expect(await s.get('/')).toEqual([500, expect.stringMatching(ON_LIMITED)])
    } finally {
      await s.close()
    }
  })

  it('fastify: its error handler', async () => {
    const app = await fastifyApp(refused())
    expect((await app.inject('/')).statusCode).toBe(200)
    const denied = await app.inject('/')
    expect([denied.statusCode, denied.body]).toEqual([500, expect.stringMatching(ON_LIMITED)])
    await app.close()
  })

  it('hono: app.onError', async () => {
    const app = honoApp(refused())
    expect((await app.request('/')).status).toBe(200)
    const denied = await app.request('/')
    expect([denied.status, await denied.text()]).toEqual([500, expect.stringMatching(ON_LIMITED)])
  })

  it('fetch: the wrapped handler rejects', async () => {
    const handler = withRateLimit(() => new Response('ok'), { ...refused(), peer: () => '192.0.2.1' })
    expect((await handler(new Request('http://127.0.0.1/'))).status).toBe(200)
    const denied = handler(new Request('http://127.0.0.1/')).catch(codeOf)
    await expect(denied).resolves.toMatch(ON_LIMITED)
  })
})

// An onLimited answer with a field HTTP/1.1 cannot carry (a character above U+00FF, a line break,
// a name that is no token) fails before anything of the denial is set: before, Node's setHeader
// threw halfway, so Express's own error page went out as a 429 with some of the denial's fields,
// and a Fastify or Node 500 carried its `retry-after` and problem content type.
describe('an onLimited answer with a field HTTP cannot carry', () => {
  function badField(field: readonly [unknown, unknown]): RateLimitOptions {
    return {
      limiter: createLimiter({
        rules: [{ name: 'hourly', algorithm: gcra({ limit: 1, period: '1h' }) }],
        clock: manualClock(0),
      }),
      onLimited: ({ response }) => ({ ...response, headers: [...response.headers, field] }) as HttpAnswer,
    }
  }
  const FIELDS: [string, readonly [unknown, unknown], RegExp][] = [
    ['an en dash', ['x-note', 'slow \u2013 down'], /"x-note" \(string\): "slow \u2013 down" \(string\)/],
    [
      'a line break',
      ['x-note', 'a\r\nset-cookie: x=1'],
      /"x-note" \(string\): "a\\r\\nset-cookie: x=1" \(string\)/,
    ],
    ['a name with a space', ['x note', 'ok'], /"x note" \(string\): "ok" \(string\)/],
    ['a value that is no string', ['x-note', undefined], /"x-note" \(string\): undefined/],
  ]
  const message = (detail: RegExp) =>
    new RegExp(
      `^ERR_EDGELIMIT_ON_LIMITED: The onLimited answer has a field HTTP cannot carry: ${detail.source}`,
    )

  /** Express with its own final handler: the status it answers is the response's, if an error one. */
  async function expressDefault(options: RateLimitOptions) {
    const app = express()
    app.use(expressRateLimit(options))
    app.get('/', (_req, res) => {
      res.send('ok')
    })
    return serve(createServer(app))
  }

  it.each(FIELDS)('node, %s: the promise rejects before any field is set', async (_what, field, detail) => {
    const limit = nodeRateLimit(badField(field))
    const s = await serve(
      createServer((req, res) => {
        limit(req, res).then(
          () => res.end('ok'),
          (error) => {
            // What the denial had set when it failed: nothing.
            const set = Object.keys(res.getHeaders()).sort().join(' ')
            res.statusCode = 500
            res.end(`${codeOf(error)} | ${res.statusCode} ${set}`)
          },
        )
      }),
    )
    try {
      expect(await s.get('/')).toEqual([200, 'ok'])
      const [status, body] = await s.get('/')
      expect(status).toBe(500)
      expect(body).toMatch(message(detail))
      expect(body.split(' | ')[1]).toBe('500 ')
    } finally {
      await s.close()
    }
  })

  it.each(FIELDS)("express, %s: next(err), a 500 with none of the denial's fields", async (_what, field) => {
    const s = await expressDefault(badField(field))
    try {
      expect(await s.get('/')).toEqual([200, 'ok'])
      const res = await s.raw('/')
      expect(res.status).toBe(500)
      expect([res.headers.get('retry-after'), res.headers.get('ratelimit')]).toEqual([null, null])
    } finally {
      await s.close()
    }
  })

  it.each(FIELDS)(
    "fastify, %s: its error handler, with none of the denial's fields",
    async (_what, field, detail) => {
      const app = await fastifyApp(badField(field))
      expect((await app.inject('/')).statusCode).toBe(200)
      const denied = await app.inject('/')
      expect([denied.statusCode, denied.body]).toEqual([500, expect.stringMatching(message(detail))])
      expect([denied.headers['retry-after'], denied.headers.ratelimit]).toEqual([undefined, undefined])
      await app.close()
    },
  )

  it.each(FIELDS)('hono, %s: app.onError', async (_what, field, detail) => {
    const app = honoApp(badField(field))
    expect((await app.request('/')).status).toBe(200)
    const denied = await app.request('/')
    expect([denied.status, await denied.text()]).toEqual([500, expect.stringMatching(message(detail))])
  })
})

// A fetch handler that returns something other than a Response (a string, a plain object, a
// number) is the handler's bug, not a rate-limit error: the wrapper hands the value back untouched,
// for the runtime to refuse as it refuses any handler's (Deno: "Return value from serve handler
// must be a response"), instead of failing inside edgelimit with a TypeError about `Response`.
describe('a fetch handler that returns no Response', () => {
  it.each([
    ['a string', 'hello'],
    ['a number', 7],
    ['a plain object', { body: 'x' }],
    ['undefined', undefined],
  ])('returns %s as it is', async (_what, value) => {
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: gcra({ limit: 5, period: '1h' }) }],
      clock: manualClock(0),
    })
    const handler = withRateLimit(() => value as unknown as Response, { limiter, peer: () => '192.0.2.1' })
    await expect(handler(new Request('http://127.0.0.1/'))).resolves.toBe(value)
    // Decided and charged as any request: the second of five leaves three.
    const next = withRateLimit(() => new Response('ok'), { limiter, peer: () => '192.0.2.1' })
    expect((await next(new Request('http://127.0.0.1/'))).headers.get('ratelimit')).toBe('"r";r=3;t=1440')
  })
})
