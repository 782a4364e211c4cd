// The admin API's edges: the store down, the token, body size in bytes, bad fields, methods.
import { connect } from 'node:net'
import { manualClock } from 'edgelimit/testing'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type RedisServer, startRedis } from '../../edgelimit/test/support/redis.js'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { type InProcess, rawRequest, socketReader, startInProcess } from './support/gateway.js'
import { type Origin, startOrigin } from './support/origin.js'

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

const TOKEN = 's3cret'
const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }
const post = (gw: InProcess, path: string, body: unknown) =>
  fetch(`${gw.admin}${path}`, {
    method: 'POST',
    headers: auth,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })

/**
 * The fixed windows' length: they count on Redis TIME or the system clock, and a test that spanned
 * the end of one (an hour's at XX:00:00) would see its counts start again.
 */
const WINDOW = farWindow()

// Two rules on every path, keyed by client; a short deadline so that a dead store fails fast.
const onRedis = (url: string) => `
store: ${url}
admin: { token: ${TOKEN} }
identity: { secret: test }
rules:
  - { name: open, algorithm: fixed-window, limit: 3, window: ${WINDOW}, onStoreError: open, timeout: 500ms }
  - { name: shut, algorithm: fixed-window, limit: 3, window: ${WINDOW}, onStoreError: closed, timeout: 500ms }
`

/** A gateway on a redis-server of its own, started before the block's tests (which stop it). */
function onOwnRedis(): { redis: RedisServer; gw: InProcess } {
  const own = {} as { redis: RedisServer; gw: InProcess }
  beforeAll(async () => {
    own.redis = await startRedis()
    own.gw = await startInProcess(onRedis(own.redis.url), { upstream: origin.url })
  })
  afterAll(async () => {
    await own.gw?.close()
    await own.redis?.stop()
  })
  return own
}

describe('reset with the store down', () => {
  const own = onOwnRedis()

  test('bad input is a 400 with a code; a store failure a 503 saying the store is unreachable', async () => {
    expect((await post(own.gw, '/admin/reset', { rule: 'open', key: 'k' })).status).toBe(200)
    const bad = await post(own.gw, '/admin/reset', '{"rule":')
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ status: 400, code: 'ERR_BODY', detail: 'the body is not JSON' })
    await own.redis.stop()
    const down = await post(own.gw, '/admin/reset', { rule: 'open', key: 'k' })
    expect(down.status).toBe(503)
    expect(down.headers.get('content-type')).toBe('application/problem+json')
    const problem = (await down.json()) as { detail: string }
    expect(problem).toMatchObject({ status: 503, code: 'ERR_STORE_UNAVAILABLE', instance: '/admin/reset' })
    expect(problem.detail).toBe(
      'The store is unreachable or did not answer in time: the reset is not confirmed. Try again once it is back.',
    )
    expect(own.gw.logs.some((l) => l.msg === 'admin: reset failed' && l.rule === 'open')).toBe(true)
  })
})

describe('peek with the store down', () => {
  const own = onOwnRedis()
  const storeMetrics = async () =>
    (await (await fetch(`${own.gw.admin}/metrics`)).text())
      .split('\n')
      .filter((l) =>
        /^edgelimit_(store_errors_total|store_fallbacks_total|store_latency_seconds_count|breaker_state)/.test(
          l,
        ),
      )

  test('an answer from a fallback is a 503 problem, never a state; admin peeks count in no request metric', async () => {
    for (let i = 0; i < 2; i++) await (await fetch(`${own.gw.url}/x`)).arrayBuffer()
    const before = await storeMetrics()
    const up = await post(own.gw, '/admin/peek', { rule: 'shut', ip: '127.0.0.1' })
    expect(up.status).toBe(200)
    expect(((await up.json()) as { plans: { decision: unknown }[] }).plans[0]?.decision).toMatchObject({
      limit: 3,
      remaining: 1,
    })
    expect(await storeMetrics()).toEqual(before)
    await own.redis.stop()
    for (const rule of ['open', 'shut']) {
      const response = await post(own.gw, '/admin/peek', { rule, ip: '127.0.0.1' })
      expect(response.status).toBe(503)
      expect(await response.json()).toMatchObject({
        status: 503,
        code: 'ERR_STORE_UNAVAILABLE',
        detail:
          "The store is unreachable: this is what the rule would answer without it, not the key's state.",
      })
    }
    expect(await storeMetrics()).toEqual(before)
    // Requests still count.
    await (await fetch(`${own.gw.url}/x`)).arrayBuffer()
    expect(await storeMetrics()).not.toEqual(before)
  })
})

describe('peek of an approximate rule', () => {
  test('includes what this gateway admitted and has not synced yet: the remaining it will actually allow', async () => {
    const redis = await startRedis()
    // Nothing here waits on the time: the gateways decide on a clock that stands still until the
    // test moves it (no sync is due before), their store calls have no deadline (a loaded machine
    // cannot turn a slow answer into a fallback), and the store's windows, on Redis TIME, end far
    // from this run.
    const clock = manualClock(1_750_000_000_000)
    const policy = `
store: ${redis.url}
admin: { token: ${TOKEN} }
identity: { secret: test }
defaults: { consistency: approximate, syncInterval: 1h, timeout: false }
rules:
  - { name: approx, algorithm: fixed-window, limit: 10, window: ${WINDOW} }
  - name: tiered
    algorithm: token-bucket
    refillRate: 1
    refillInterval: ${WINDOW}
    tiers: { header: x-plan, default: free, plans: { free: { capacity: 5 }, pro: { capacity: 8 } } }
`
    const gw = await startInProcess(policy, { upstream: origin.url, clock })
    // Another gateway on the same Redis sees only what has reached the store.
    const other = await startInProcess(policy, { upstream: origin.url, clock })
    const peek = async (on: InProcess, body: Record<string, unknown>) => {
      const response = await post(on, '/admin/peek', body)
      expect(response.status).toBe(200)
      return (
        (await response.json()) as { plans: { tier: string; decision: { remaining: number } }[] }
      ).plans.map((p) => [p.tier, p.decision.remaining])
    }
    const approx = { rule: 'approx', ip: '127.0.0.1' }
    const pro = { rule: 'tiered', ip: '127.0.0.1', headers: { 'x-plan': 'pro' } }
    const request = async () =>
      expect((await fetch(`${gw.url}/x`, { headers: { 'x-plan': 'pro' } })).status).toBe(200)
    let after: InProcess | undefined
    try {
      for (let i = 0; i < 4; i++) await request()
      // The first request went to the store; the next three are counted here, not synced.
      expect(await peek(gw, approx)).toEqual([['', 6]])
      expect(await peek(gw, pro)).toEqual([['pro', 4]])
      expect(await peek(other, approx)).toEqual([['', 9]])
      expect(await peek(other, pro)).toEqual([['pro', 7]])
      // A peek charges nothing, here or in the store.
      expect(await peek(gw, approx)).toEqual([['', 6]])
      expect(await peek(gw, pro)).toEqual([['pro', 4]])
      // An interval on, the next request sends the three and is counted here: this gateway
      // allows 5 more (and 3), whether the sync has been answered yet or not.
      clock.advance(3_600_000)
      await request()
      expect(await peek(gw, approx)).toEqual([['', 5]])
      expect(await peek(gw, pro)).toEqual([['pro', 3]])
      // Closing waits for that sync and sends the fifth: the store then holds all five, as a
      // gateway started now reads it. (`other` would still answer from its own counts, read from
      // the store when it first peeked, until its next sync.)
      await gw.close()
      after = await startInProcess(policy, { upstream: origin.url, clock })
      expect(await peek(after, approx)).toEqual([['', 5]])
      expect(await peek(after, pro)).toEqual([['pro', 3]])
    } finally {
      await gw.close()
      await other.close()
      await after?.close()
      await redis.stop()
    }
  })
})

const MEMORY = `
identity: { secret: test }
rules:
  - { name: login, match: { path: /login }, algorithm: fixed-window, limit: 3, window: ${WINDOW} }
  - name: api
    algorithm: fixed-window
    window: ${WINDOW}
    tiers: { header: x-plan, default: free, plans: { free: { limit: 2 }, pro: { limit: 4 } } }
`

describe('the admin token', () => {
  test("a configured token with surrounding whitespace (a secret file's newline) admits; the scheme is case-insensitive", async () => {
    const gw = await startInProcess(MEMORY, { upstream: origin.url, adminToken: `  ${TOKEN}\n` })
    try {
      for (const authorization of [
        `Bearer ${TOKEN}`,
        `bearer ${TOKEN}`,
        `BEARER   ${TOKEN}`,
        `bEaReR\t${TOKEN}`,
      ]) {
        const response = await fetch(`${gw.admin}/admin/rules`, { headers: { authorization } })
        expect(response.status, authorization).toBe(200)
      }
      for (const authorization of [
        '',
        'Bearer',
        'Bearer ',
        `Bearer${TOKEN}`,
        `Basic ${TOKEN}`,
        `Bearer ${TOKEN}x`,
      ]) {
        const response = await fetch(`${gw.admin}/admin/rules`, { headers: { authorization } })
        expect(response.status, authorization).toBe(401)
      }
    } finally {
      await gw.close()
    }
  })

  test('a token with non-ASCII characters admits the client that sends it (in UTF-8, as curl does), and no other', async () => {
    const token = 'pässwörd-€-à'
    const gw = await startInProcess(MEMORY, { upstream: origin.url, adminToken: token })
    // Header strings go out as Latin-1: these are the UTF-8 bytes of each token on the wire.
    const wire = (text: string) => Buffer.from(text, 'utf8').toString('latin1')
    const status = async (authorization: string) =>
      (await rawRequest(`${gw.admin}/admin/rules`, { headers: { authorization } })).status
    try {
      expect(await status(`Bearer ${wire(token)}`)).toBe(200)
      expect(await status(`bearer \t${wire(token)} `)).toBe(200)
      // Without its last byte (0xA0, the end of `à`), or with one letter changed, it is another token.
      expect(await status(`Bearer ${wire(token).slice(0, -1)}`)).toBe(401)
      expect(await status(`Bearer ${wire('passwörd-€-à')}`)).toBe(401)
    } finally {
      await gw.close()
    }
  })

  test('a token of only whitespace leaves the admin API off', async () => {
    const gw = await startInProcess(MEMORY, { upstream: origin.url, adminToken: ' \n' })
    try {
      for (const authorization of ['', 'Bearer ', 'Bearer  \n']) {
        const response = await fetch(`${gw.admin}/admin/rules`, { headers: { authorization } })
        expect(response.status, authorization).toBe(404)
      }
    } finally {
      await gw.close()
    }
  })
})

describe('admin bodies', () => {
  let gw: InProcess
  beforeAll(async () => {
    gw = await startInProcess(MEMORY, { upstream: origin.url, adminToken: TOKEN })
  })
  afterAll(() => gw?.close())

  test('the 64 KiB limit counts bytes, not characters (a chunked body of "€", 3 bytes each)', async () => {
    const body = (bytes: number) => {
      const head = '{"rule":"nope","key":"'
      const fill = bytes - head.length - 2
      return Buffer.from(`${head}${'€'.repeat(Math.floor(fill / 3))}${'a'.repeat(fill % 3)}"}`)
    }
    const send = (b: Buffer) =>
      rawRequest(`${gw.admin}/admin/peek`, {
        method: 'POST',
        headers: { ...auth, 'transfer-encoding': 'chunked' },
        body: b,
      })
    expect(body(65_536).length).toBe(65_536)
    expect((await send(body(65_536))).status).toBe(404)
    const over = await send(body(65_537))
    expect(over.status).toBe(413)
    expect(JSON.parse(over.body.toString())).toMatchObject({ code: 'ERR_TOO_LARGE' })
    expect((await send(body(195_028))).status).toBe(413)
  })

  test('Expect: 100-continue invites the body only when it is read: a 401 or a too-large Content-Length refuses it unsent', async () => {
    const port = Number(new URL(gw.admin).port)
    /** The first answer on a raw connection to a request head that expects 100-continue. */
    const first = async (authorization: string, length: number) => {
      const socket = connect(port, '127.0.0.1')
      const answer = socketReader(socket)
      socket.write(
        `POST /admin/peek HTTP/1.1\r\nhost: a\r\nauthorization: ${authorization}\r\ncontent-type: application/json\r\nexpect: 100-continue\r\ncontent-length: ${length}\r\n\r\n`,
      )
      const text = await answer.until((t) => t.includes('\r\n\r\n'))
      return { socket, answer, status: text.slice(0, text.indexOf('\r\n')) }
    }
    const big = await first(`Bearer ${TOKEN}`, 65_537)
    expect(big.status).toBe('HTTP/1.1 413 Payload Too Large')
    big.socket.destroy()
    const stranger = await first('Bearer wrong', 10)
    expect(stranger.status).toBe('HTTP/1.1 401 Unauthorized')
    stranger.socket.destroy()
    // Admitted and in size: invited, then answered once the body is in.
    const body = JSON.stringify({ rule: 'login', key: 'x' })
    const fine = await first(`Bearer ${TOKEN}`, Buffer.byteLength(body))
    expect(fine.status).toBe('HTTP/1.1 100 Continue')
    fine.socket.end(body)
    expect(await fine.answer.until((t) => t.includes('"rule":"login"'))).toMatch(
      /\r\n\r\nHTTP\/1\.1 200 OK\r\n/,
    )
  })

  test('a tier that is not a string: 400 saying so', async () => {
    for (const tier of [{}, { toString: 1 }, [], ['pro'], 1, true, null]) {
      const response = await post(gw, '/admin/peek', { rule: 'api', tier })
      expect(response.status, JSON.stringify(tier)).toBe(400)
      const problem = (await response.json()) as { detail: string; code: string }
      expect(problem.code).toBe('ERR_STRING')
      expect(problem.detail).toMatch(/^tier: expected a plan name of rule api \(free, pro\), got /)
    }
    expect((await post(gw, '/admin/peek', { rule: 'api', tier: 'pro', ip: '127.0.0.1' })).status).toBe(200)
    expect((await post(gw, '/admin/peek', { rule: 'api', tier: 'gold' })).status).toBe(404)
  })

  test('no rule, a rule that is not a string, or no ip for a rule keyed by ip: 400 saying what to give', async () => {
    for (const [body, code, detail] of [
      [{}, 'ERR_BODY', 'rule: required, the rule whose key to name (rules: login, api)'],
      [{ key: 'x' }, 'ERR_BODY', 'rule: required, the rule whose key to name (rules: login, api)'],
      [{ rule: ['login'], key: 'x' }, 'ERR_STRING', 'rule: expected a rule name (login, api), got an array'],
      [
        { rule: 'login', method: 'POST', path: '/login' },
        'ERR_BODY',
        "rule login counts by client address: give the request's ip, or the key a log line shows",
      ],
    ] as const) {
      for (const path of ['/admin/peek', '/admin/reset']) {
        const response = await post(gw, path, body)
        expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400)
        expect(await response.json()).toMatchObject({ code, detail })
      }
    }
    // The empty body is the same missing rule.
    expect(await (await post(gw, '/admin/peek', '')).json()).toMatchObject({
      code: 'ERR_BODY',
      detail: expect.stringMatching(/^rule: required/),
    })
    expect(gw.logs.filter((l) => l.msg === 'admin: key reset')).toEqual([])
    // By key, no address is needed.
    expect(
      (await post(gw, '/admin/peek', { rule: 'login', key: 'F9t9eTf7Tgrx8B1l7s1iXPvZmsU_tsugD_ngS81aST0' }))
        .status,
    ).toBe(200)
  })

  test('a misspelt field, a field of the wrong type or an ip that is no address: 400, not a peek or reset of another key', async () => {
    const login = async () => (await rawRequest(`${gw.url}/login`)).status
    // Login counts all three (its limit), api (free: 2) denies the third.
    expect([await login(), await login(), await login()]).toEqual([200, 200, 429])
    const who = { rule: 'login', method: 'GET', path: '/login' }
    for (const [body, code, detail] of [
      [{ ...who, IP: '203.0.113.7' }, 'ERR_BODY', /^unknown field "IP"; expected rule, tier, key, ip, /],
      [{ ...who, client: '203.0.113.7' }, 'ERR_BODY', /^unknown field "client"/],
      [
        { ...who, ip: '203.0.113.777' },
        'ERR_BODY',
        /^ip: expected an IPv4 or IPv6 address, got "203.0.113.777"$/,
      ],
      [{ ...who, ip: ' 203.0.113.7' }, 'ERR_BODY', /^ip: expected an IPv4 or IPv6 address/],
      [{ ...who, ip: 2130706433 }, 'ERR_STRING', /^ip: expected a string, got 2130706433 \(number\)$/],
      [
        { ...who, ip: '127.0.0.1', path: ['/login'] },
        'ERR_STRING',
        /^path: expected a string, got an array$/,
      ],
      [{ rule: 'api', headers: 'x-plan: pro' }, 'ERR_BODY', /^headers: expected an object of strings/],
      [{ rule: 'api', headers: { 'x-plan': 1 } }, 'ERR_STRING', /^headers\.x-plan: expected a string, got 1/],
      [{ rule: 'api', query: ['a'] }, 'ERR_BODY', /^query: expected an object of strings/],
    ] as const) {
      for (const path of ['/admin/peek', '/admin/reset']) {
        const response = await post(gw, path, body)
        expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400)
        const problem = (await response.json()) as { detail: string; code: string }
        expect(problem.code).toBe(code)
        expect(problem.detail).toMatch(detail)
      }
    }
    // Nothing was reset, and the client's own state is what a peek naming it shows.
    expect(gw.logs.filter((l) => l.msg === 'admin: key reset')).toEqual([])
    const peek = (await (await post(gw, '/admin/peek', { ...who, ip: '127.0.0.1' })).json()) as {
      plans: { decision: { remaining: number } }[]
    }
    expect(peek.plans[0]?.decision.remaining).toBe(0)
    // An address in either form is a request from that client.
    for (const ip of ['127.0.0.1', '::ffff:127.0.0.1', '2001:db8::1'])
      expect((await post(gw, '/admin/peek', { ...who, ip })).status).toBe(200)
  })

  test('a known path with another method: 405 with Allow; HEAD answers as GET without a body', async () => {
    for (const [method, path, allow] of [
      ['GET', '/admin/peek', 'POST'],
      ['GET', '/admin/reset', 'POST'],
      ['PUT', '/admin/reload', 'POST'],
      ['DELETE', '/admin/rules', 'GET, HEAD'],
      ['POST', '/metrics', 'GET, HEAD'],
      ['DELETE', '/healthz', 'GET, HEAD'],
      ['POST', '/readyz', 'GET, HEAD'],
    ] as const) {
      const response = await rawRequest(`${gw.admin}${path}`, { method, headers: auth })
      expect(response.status, `${method} ${path}`).toBe(405)
      expect(response.headers.allow).toBe(allow)
      expect(JSON.parse(response.body.toString())).toMatchObject({ status: 405, code: 'ERR_METHOD' })
    }
    for (const path of ['/metrics', '/healthz', '/readyz', '/admin/rules']) {
      const get = await rawRequest(`${gw.admin}${path}`, { headers: auth })
      const head = await rawRequest(`${gw.admin}${path}`, { method: 'HEAD', headers: auth })
      expect([head.status, head.headers['content-type'], head.body.length], path).toEqual([
        get.status,
        get.headers['content-type'],
        0,
      ])
      expect(get.body.length).toBeGreaterThan(0)
    }
    // Unknown paths stay 404; the admin API still asks for its token first.
    expect((await rawRequest(`${gw.admin}/admin/nope`, { headers: auth })).status).toBe(404)
    expect((await rawRequest(`${gw.admin}/admin/peek`)).status).toBe(401)
  })
})

describe('a request described without the header or parameter its rule is keyed by', () => {
  // Keyed by API key (the tier too): a request without one is counted by its client address.
  const BY_KEY = `
identity: { secret: test }
admin: { token: ${TOKEN} }
rules:
  - { name: api, match: { path: /api/** }, key: header:x-api-key, algorithm: fixed-window, limit: 2, window: ${WINDOW} }
  - { name: search, match: { path: /search }, key: query:q, algorithm: fixed-window, limit: 2, window: ${WINDOW} }
`
  let gw: InProcess
  beforeAll(async () => {
    gw = await startInProcess(BY_KEY, { upstream: origin.url })
  })
  afterAll(() => gw?.close())

  test('needs the ip its key falls back to: 400 naming what to give, not a peek or reset of a key no client has', async () => {
    const send = async (headers: Record<string, string> = {}) =>
      (await rawRequest(`${gw.url}/api/orders`, { headers })).status
    // The client without an API key is counted by its address, as the one with a key by the key.
    expect([await send(), await send(), await send()]).toEqual([200, 200, 429])
    expect([await send({ 'x-api-key': 'k1' }), await send({ 'x-api-key': 'k1' })]).toEqual([200, 200])
    for (const [body, detail] of [
      // A misspelt header name describes a request without the key's header.
      [
        { rule: 'api', path: '/api/orders', headers: { 'x-apikey': 'k1' } },
        "rule api is keyed by header:x-api-key, which the request described lacks (such a request counts by its client address): give it, the request's ip, or the key a log line shows",
      ],
      [
        { rule: 'api', path: '/api/orders' },
        "rule api is keyed by header:x-api-key, which the request described lacks (such a request counts by its client address): give it, the request's ip, or the key a log line shows",
      ],
      [
        { rule: 'search', path: '/search', query: { Q: 'shoes' } },
        "rule search is keyed by query:q, which the request described lacks (such a request counts by its client address): give it, the request's ip, or the key a log line shows",
      ],
    ] as const) {
      for (const path of ['/admin/peek', '/admin/reset']) {
        const response = await post(gw, path, body)
        expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400)
        expect(await response.json()).toMatchObject({ code: 'ERR_BODY', detail })
      }
    }
    expect(gw.logs.filter((l) => l.msg === 'admin: key reset')).toEqual([])
    const remaining = async (body: object) =>
      (
        (await (await post(gw, '/admin/peek', body)).json()) as {
          plans: { decision: { remaining: number } }[]
        }
      ).plans[0]?.decision.remaining
    // With the header, or with the ip of a client that sends none: the keys the proxy counted.
    expect(await remaining({ rule: 'api', headers: { 'x-api-key': 'k1' } })).toBe(0)
    expect(await remaining({ rule: 'api', ip: '127.0.0.1' })).toBe(0)
    expect(await remaining({ rule: 'search', query: { q: 'shoes' } })).toBe(2)
  })
})

describe('a request described by its query', () => {
  test('names the key the proxy counts: query parameter names keep their case, as the rule reads them', async () => {
    const gw = await startInProcess(
      `
identity: { secret: test }
admin: { token: ${TOKEN} }
rules:
  - { name: search, match: { path: /search }, key: query:userId, algorithm: fixed-window, limit: 2, window: ${WINDOW} }
`,
      { upstream: origin.url },
    )
    try {
      const search = async () => (await rawRequest(`${gw.url}/search?userId=42`)).status
      expect([await search(), await search(), await search()]).toEqual([200, 200, 429])
      const who = { rule: 'search', path: '/search', query: { userId: '42' } }
      const peek = (await (await post(gw, '/admin/peek', who)).json()) as {
        key: string
        plans: { decision: { remaining: number } }[]
      }
      expect(peek.plans[0]?.decision.remaining).toBe(0)
      // The key is the one the request's own parameter gives (not the key of a request without it).
      const line = (await (await post(gw, '/admin/peek', { rule: 'search', key: peek.key })).json()) as {
        plans: { decision: { remaining: number } }[]
      }
      expect(line.plans[0]?.decision.remaining).toBe(0)
      expect((await post(gw, '/admin/reset', who)).status).toBe(200)
      expect(await search()).toBe(200)
    } finally {
      await gw.close()
    }
  })
})

describe('every admin error is a problem with a code', () => {
  test('401, the API off, unknown paths, rules and tiers: each with its code; 413 titled as RFC 9110 names it', async () => {
    const on = await startInProcess(MEMORY, { upstream: origin.url, adminToken: TOKEN })
    const off = await startInProcess(MEMORY, { upstream: origin.url })
    const problem = async (response: Response) => ({
      ...((await response.json()) as Record<string, unknown>),
      httpStatus: response.status,
      contentType: response.headers.get('content-type'),
    })
    try {
      for (const authorization of ['', `Bearer ${TOKEN}x`]) {
        expect(
          await problem(await fetch(`${on.admin}/admin/rules`, { headers: { authorization } })),
        ).toMatchObject({
          status: 401,
          contentType: 'application/problem+json',
          title: 'Unauthorized',
          code: 'ERR_UNAUTHORIZED',
        })
      }
      expect(await problem(await fetch(`${off.admin}/admin/rules`, { headers: auth }))).toMatchObject({
        status: 404,
        code: 'ERR_ADMIN_OFF',
        detail: expect.stringContaining('The admin API is off'),
      })
      for (const url of [`${on.admin}/admin/nope`, `${on.admin}/nope`]) {
        expect(await problem(await fetch(url, { headers: auth })), url).toMatchObject({
          status: 404,
          code: 'ERR_NOT_FOUND',
        })
      }
      expect(await problem(await post(on, '/admin/peek', { rule: 'nope', key: 'k' }))).toMatchObject({
        status: 404,
        code: 'ERR_UNKNOWN_RULE',
        detail: 'no rule named "nope"; rules: login, api',
      })
      expect(await problem(await post(on, '/admin/reset', { rule: 'api', tier: 'gold' }))).toMatchObject({
        status: 404,
        code: 'ERR_UNKNOWN_TIER',
        detail: 'rule api has no tier "gold"',
      })
      const over = await rawRequest(`${on.admin}/admin/peek`, {
        method: 'POST',
        headers: auth,
        body: Buffer.alloc(65_537, 'a'),
      })
      expect(JSON.parse(over.body.toString())).toMatchObject({
        status: 413,
        title: 'Content Too Large',
        code: 'ERR_TOO_LARGE',
      })
    } finally {
      await on.close()
      await off.close()
    }
  })
})

describe('POST /admin/reload while the gateway drains', () => {
  test('is refused with 422 and an error saying the gateway is stopping, not an empty rejection', async () => {
    const gw = await startInProcess(`admin: { token: ${TOKEN} }\nrules: []\n`, { upstream: origin.url })
    // A request the origin holds keeps the gateway draining (and the operations port up).
    const slow = fetch(`${gw.url}/slow?ms=1500`)
    await expect.poll(() => gw.gateway.metrics.inFlight).toBe(1)
    const closed = gw.close()
    try {
      const response = await post(gw, '/admin/reload', '')
      expect(response.status).toBe(422)
      expect(await response.json()).toEqual({ ok: false, issues: [], error: 'the gateway is stopping' })
      expect(gw.logs.find((l) => l.msg === 'reload abandoned: the gateway is stopping')).toMatchObject({
        reason: 'admin API',
      })
      expect((await slow).status).toBe(200)
    } finally {
      await closed
    }
  })
})
