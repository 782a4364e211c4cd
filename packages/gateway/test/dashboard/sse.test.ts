// The dashboard's event stream over real HTTP: a real gateway in front of a real origin, traffic
// flowing while the stream is read; clients that leave; shutdown with a stream open.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { type RedisServer, startRedis } from '../../../edgelimit/test/support/redis.js'
import { farWindow } from '../../../edgelimit/test/support/window.js'
import { createDashboard, type DashboardMessage } from '../../src/server/dashboard.js'
import { createDashboardData } from '../../src/server/dashboard-data.js'
import {
  burst,
  count,
  type InProcess,
  rawRequest,
  spawnGateway,
  startInProcess,
  tempDir,
  writePolicy,
} from '../support/gateway.js'
import { type Origin, startOrigin } from '../support/origin.js'
import { merged, openStream, type SseEvent, type SseStream, sum, totals } from './sse.js'

// A shadow rule first (it sees every request), then an enforced one; on the system clock, in a
// window whose end no test here spans (the counts would start again).
const WINDOW = farWindow()
const POLICY = `
identity: { secret: dashboard-test-secret }
rules:
  - { name: probe, mode: shadow, match: { path: /api/** }, key: ip, algorithm: fixed-window, limit: 3, window: ${WINDOW} }
  - { name: api, match: { path: /api/** }, key: ip, algorithm: fixed-window, limit: 5, window: ${WINDOW} }
`

const body = (e: SseEvent) => JSON.parse(e.data) as DashboardMessage

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

async function get(url: string): Promise<number> {
  const res = await rawRequest(url)
  return res.status
}

describe('GET /dashboard/events on a running gateway', () => {
  let gw: InProcess
  beforeAll(async () => {
    gw = await startInProcess(POLICY, { upstream: origin.url })
  })
  afterAll(async () => {
    await gw?.close()
  })

  test('a snapshot, then updates that follow the traffic, per rule and outcome', async () => {
    const stream = await openStream(`${gw.admin}/dashboard/events`)
    expect(stream.status).toBe(200)
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8')
    expect(stream.headers['cache-control']).toBe('no-store')
    const first = body(await stream.next((e) => e.event === 'snapshot'))
    expect(stream.retry).toBe(2000)
    // The rules in force, by mode, before any traffic.
    expect(first.series.map((s) => `${s.key}=${s.total}`)).toEqual([
      'probe/allowed=0',
      'probe/shadow_denied=0',
      'api/allowed=0',
      'api/denied=0',
    ])
    expect(first.context).toMatchObject({ store: { type: 'memory', status: 'ready' }, generation: 1 })

    // Traffic in two waves, each seen in an update before the next starts.
    const wave1 = await burst(4, 2, () => get(`${gw.url}/api/a`))
    const seen1 = await stream.next(
      (e) =>
        e.event === 'update' &&
        (totals(body(e))['probe/allowed'] ?? 0) + (totals(body(e))['probe/shadow_denied'] ?? 0) === 4,
    )
    expect(totals(body(seen1))).toEqual({
      'probe/allowed': 3,
      'probe/shadow_denied': 1,
      'api/allowed': 4,
      'api/denied': 0,
    })
    const wave2 = await burst(6, 3, () => get(`${gw.url}/api/b`))
    const statuses = [...wave1, ...wave2]
    expect([count(statuses, 200), count(statuses, 429)]).toEqual([5, 5])
    await stream.next((e) => e.event === 'update' && totals(body(e))['api/denied'] === 5)

    // The points, merged as the page merges them, add up to what the traffic produced.
    const { last, points } = merged(stream.events)
    expect(totals(last)).toEqual({
      'probe/allowed': 3,
      'probe/shadow_denied': 7,
      'api/allowed': 5,
      'api/denied': 5,
    })
    for (const [key, n] of Object.entries(totals(last))) expect(sum(points, key)).toBe(n)
    // One point per second, in order, without gaps.
    const ts = points.map((p) => p.t)
    expect(ts).toEqual(ts.map((_, i) => (ts[0] as number) + i))

    // Top keys: one client, hashed as in the gateway's own "would block" log lines.
    const logged = gw.logs.filter((l) => l.msg === 'shadow: would block')
    expect(logged).toHaveLength(7)
    const probeKey = logged[0]?.key as string
    expect(probeKey).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(last.topKeys).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ rule: 'probe', key: probeKey, requests: 10, allowed: 3, shadowDenied: 7 }),
        expect.objectContaining({ rule: 'api', requests: 10, allowed: 5, denied: 5 }),
      ]),
    )
    expect(JSON.stringify(last)).not.toContain('127.0.0.1')
    // The same numbers as /metrics.
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
    expect(metrics).toContain('edgelimit_decisions_total{rule="probe",tier="",outcome="shadow_denied"} 7')
    expect(metrics).toContain('edgelimit_decisions_total{rule="api",tier="",outcome="denied"} 5')
    stream.close()
  })

  test('the page is self-contained: inline script and styles, a CSP that allows no other origin', async () => {
    const res = await rawRequest(`${gw.admin}/dashboard`)
    expect(res.status).toBe(200)
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(res.headers['content-security-policy']).toContain("default-src 'none'")
    expect(res.headers['content-security-policy']).toContain("connect-src 'self'")
    const html = res.body.toString()
    expect(html).toContain('uPlot')
    // Nothing to fetch: no script, stylesheet or image by address (the browser test checks requests).
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|<img[^>]+src=|url\(|@import/)
    expect((await rawRequest(`${gw.admin}/dashboard`, { method: 'POST' })).status).toBe(405)
  })

  test('another method is a 405 problem with a code and Allow, as elsewhere on the operations port', async () => {
    for (const path of ['/dashboard', '/dashboard/', '/dashboard/events']) {
      const res = await rawRequest(`${gw.admin}${path}`, { method: 'DELETE' })
      expect([res.status, res.headers['content-type'], res.headers.allow], path).toEqual([
        405,
        'application/problem+json',
        'GET, HEAD',
      ])
      expect(JSON.parse(res.body.toString()), path).toMatchObject({
        status: 405,
        code: 'ERR_METHOD',
        detail: 'DELETE is not allowed here: GET, HEAD.',
        instance: path,
      })
    }
  })
})

describe('the stream keeps nothing behind', () => {
  test('the timer runs only while clients are connected; leaving clients are forgotten', async () => {
    let now = 1_000_000
    const data = createDashboardData({ now: () => now })
    const dashboard = createDashboard({
      data,
      intervalMs: 20,
      maxClients: 3,
      context: () => ({
        rules: [],
        store: { type: 'memory', status: 'ready' },
        generation: 1,
        draining: false,
      }),
    })
    const server = createServer((req, res) => {
      if (!dashboard.handle(req, res, (req.url ?? '/').split('?')[0] as string)) res.writeHead(404).end()
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/dashboard/events`
    try {
      expect(dashboard.ticking).toBe(false)
      const streams = await Promise.all([openStream(url), openStream(url), openStream(url)])
      const one = streams[0] as SseStream
      expect(dashboard.clients).toBe(3)
      expect(dashboard.ticking).toBe(true)
      // A fourth is refused rather than queued, with a problem saying why.
      expect((await openStream(url)).status).toBe(503)
      const full = await rawRequest(url)
      expect([full.headers['content-type'], full.headers['retry-after']]).toEqual([
        'application/problem+json',
        '5',
      ])
      expect(JSON.parse(full.body.toString())).toMatchObject({
        status: 503,
        code: 'ERR_TOO_MANY_CLIENTS',
        detail: 'Too many dashboard clients (3 at once): try again later.',
      })
      // Each client gets the points from its last one on: the partial second again, then newer ones.
      data.decision('a', '', 'allowed')
      await one.next((e) => e.event === 'update' && (body(e).points[0]?.counts['a/allowed'] ?? 0) === 1)
      now += 1000
      data.decision('a', '', 'denied')
      const later = body(
        await one.next((e) => e.event === 'update' && body(e).points.some((p) => p.counts['a/denied'] === 1)),
      )
      expect(later.points.map((p) => p.t)).toEqual([1000, 1001])

      for (const s of streams) s.close()
      await vi.waitFor(() => expect(dashboard.clients).toBe(0), { timeout: 5000, interval: 10 })
      expect(dashboard.ticking).toBe(false)

      // close() ends the streams open at the time and refuses new ones.
      const open = await openStream(url)
      expect(dashboard.ticking).toBe(true)
      dashboard.close()
      await open.ended
      expect(dashboard.clients).toBe(0)
      expect(dashboard.ticking).toBe(false)
      expect((await openStream(url)).status).toBe(503)
      expect(JSON.parse((await rawRequest(url)).body.toString())).toMatchObject({
        status: 503,
        code: 'ERR_STOPPING',
        detail: 'The gateway is stopping.',
      })
    } finally {
      dashboard.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    }
  })

  test('gateway.close() ends an open stream', async () => {
    const gw = await startInProcess(POLICY, { upstream: origin.url })
    const stream = await openStream(`${gw.admin}/dashboard/events`)
    await stream.next((e) => e.event === 'snapshot')
    await gw.close()
    await stream.ended
  })

  test('SIGTERM: `edgelimit serve` exits 0 with a dashboard stream open', async () => {
    const file = writePolicy(tempDir(), POLICY)
    const g = await spawnGateway(['--config', file, '--upstream', origin.url, '--no-watch', '-q'])
    const stream = await openStream(`${g.admin}/dashboard/events`)
    await stream.next((e) => e.event === 'snapshot')
    expect(await get(`${g.url}/api/x`)).toBe(200)
    await stream.next((e) => e.event === 'update' && totals(body(e))['api/allowed'] === 1)
    expect(await g.stop('SIGTERM')).toBe(0)
    await stream.ended
    expect(g.logs.some((l) => l.msg === 'stopped')).toBe(true)
  })
})

describe('on Redis: store latency and the breaker', () => {
  let redis: RedisServer
  let gw: InProcess
  beforeAll(async () => {
    redis = await startRedis()
    gw = await startInProcess(
      `
store: \${REDIS_URL}
identity: { secret: dashboard-test-secret }
rules:
  - { name: api, key: global, algorithm: sliding-window, limit: 1000, window: 1h, timeout: 300ms }
`,
      { upstream: origin.url, env: { REDIS_URL: redis.url } },
    )
  })
  afterAll(async () => {
    redis?.resume()
    await gw?.close()
    await redis?.stop()
  })

  test('one latency sample per store call; timeouts open the breaker, a probe closes it', async () => {
    const stream = await openStream(`${gw.admin}/dashboard/events`)
    const first = body(await stream.next((e) => e.event === 'snapshot'))
    expect(first.breakers).toEqual([expect.objectContaining({ rule: 'api', tier: '', state: 'closed' })])
    expect(first.context.store.type).toBe('redis')

    expect(count(await burst(20, 4, () => get(`${gw.url}/x`)), 200)).toBe(20)
    await stream.next((e) => e.event === 'update' && totals(body(e))['api/allowed'] === 20)
    let { points } = merged(stream.events)
    const calls = points.reduce((n, p) => n + (p.latency?.n ?? 0), 0)
    expect(calls).toBe(20)
    for (const p of points.filter((q) => q.latency !== undefined)) {
      const l = p.latency as NonNullable<typeof p.latency>
      expect(l.p50).toBeGreaterThan(0)
      expect(l.p50).toBeLessThanOrEqual(l.p99)
      expect(l.p99).toBeLessThanOrEqual(l.max)
    }

    // A frozen Redis: every call times out, the store fails closed (503), the breaker opens.
    redis.pause()
    const frozen = await burst(12, 12, () => get(`${gw.url}/x`))
    expect(count(frozen, 503)).toBe(12)
    // Open, or half-open when the update came after its open time (1 s): the next call would probe.
    const open = body(
      await stream.next((e) => e.event === 'update' && (body(e).breakers[0]?.state ?? 'closed') !== 'closed'),
    )
    expect(open.storeErrors.timeout).toBeGreaterThanOrEqual(10)
    ;({ points } = merged(stream.events))
    expect(points.reduce((n, p) => n + p.errors, 0)).toBe(
      Object.values(open.storeErrors).reduce((a, b) => a + b, 0),
    )

    // Back: after the breaker's open time, a probe succeeds and it closes again.
    redis.resume()
    await vi.waitFor(
      async () => {
        await get(`${gw.url}/x`)
        const last = merged(stream.events).last
        expect(last.breakers[0]?.state).toBe('closed')
      },
      { timeout: 10_000, interval: 250 },
    )
    stream.close()
  })
})
