// The live dashboard in real Chromium while traffic flows through a real gateway (on a real Redis)
// to a real origin: the charts must hold one series per rule and outcome, with the counts the
// traffic produced, second by second as the server reported them.
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type RedisServer, startRedis } from '../../../edgelimit/test/support/redis.js'
import { farWindow } from '../../../edgelimit/test/support/window.js'
import type { DashboardMessage } from '../../src/server/dashboard.js'
import type { DashboardPoint } from '../../src/server/dashboard-data.js'
import { CHROMIUM_AVAILABLE, launchChromium, RESULTS } from '../support/chromium.js'
import { type InProcess, rawRequest, startInProcess } from '../support/gateway.js'
import { type Origin, startOrigin } from '../support/origin.js'
import { merged, openStream, type SseStream, totals } from './sse.js'

const TOKEN = 'dashboard-browser-test-token'
// A shadow rule by address first (it sees every request), then an enforced rule by API key. The
// fixed window counts on Redis TIME: one whose end the test cannot span, or it would count afresh.
const POLICY = `
store: \${REDIS_URL}
identity: { secret: dashboard-test-secret }
admin: { token: ${TOKEN} }
defaults: { timeout: 2s }
rules:
  - { name: probe, mode: shadow, match: { path: /api/** }, key: ip, algorithm: fixed-window, limit: 3, window: ${farWindow()} }
  - { name: api, match: { path: /api/** }, key: header:x-api-key, algorithm: sliding-log, limit: 5, window: 1h }
`

interface Drawn {
  labels: string[]
  data: (number | null)[][]
  latency: (number | null)[][]
  points: DashboardPoint[]
}

describe.skipIf(!CHROMIUM_AVAILABLE)('the live dashboard in Chromium', () => {
  let browser: Browser
  let redis: RedisServer
  let origin: Origin
  let gw: InProcess
  beforeAll(async () => {
    ;[browser, redis, origin] = await Promise.all([launchChromium(), startRedis(), startOrigin()])
    gw = await startInProcess(POLICY, { upstream: origin.url, env: { REDIS_URL: redis.url } })
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.close()
    await origin?.close()
    await redis?.stop()
  })

  const send = async (apiKey: string) =>
    (await rawRequest(`${gw.url}/api/orders`, { headers: { 'x-api-key': apiKey } })).status

  /** The key the gateway derives for a request, from its own admin API. */
  async function keyOf(body: object): Promise<string> {
    const res = await fetch(`${gw.admin}/admin/peek`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ path: '/api/orders', ...body }),
    })
    return ((await res.json()) as { key: string }).key
  }

  async function drawn(page: Page): Promise<Drawn> {
    return page.evaluate(() => {
      const d = (
        window as unknown as {
          __dashboard: {
            charts: Record<string, { series: { label: string }[]; data: (number | null)[][] }>
            points: DashboardPoint[]
          }
        }
      ).__dashboard
      const decisions = d.charts.decisions as { series: { label: string }[]; data: (number | null)[][] }
      return {
        labels: decisions.series.map((s) => String(s.label)),
        data: decisions.data.map((a) => Array.from(a)),
        latency: (d.charts.latency as { data: (number | null)[][] }).data.map((a) => Array.from(a)),
        points: d.points,
      }
    })
  }

  /** Waits until the decisions chart's series add up to `sums` (labels order). */
  async function until(page: Page, sums: number[]): Promise<void> {
    await page.waitForFunction(
      (want) => {
        const u = (window as unknown as { __dashboard: { charts: { decisions?: { data: number[][] } } } })
          .__dashboard.charts.decisions
        if (u === undefined) return false
        const got = u.data.slice(1).map((a) => a.reduce((n, v) => n + (v ?? 0), 0))
        return JSON.stringify(got) === JSON.stringify(want)
      },
      sums,
      { timeout: 20_000, polling: 100 },
    )
  }

  test('charts per rule and outcome follow the traffic; top keys, latency and breaker as reported', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
    const problems: string[] = []
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`)
    })
    page.on('request', (r) => {
      if (!r.url().startsWith(`${gw.admin}/dashboard`)) problems.push(`request: ${r.url()}`)
    })
    // A second reader beside the page: what the server sent, to compare the drawing with.
    const stream: SseStream = await openStream(`${gw.admin}/dashboard/events`)
    await page.goto(`${gw.admin}/dashboard`)
    await page.waitForFunction(() => document.body.dataset.ready === 'true', undefined, { timeout: 20_000 })

    // Before traffic: the series of the rules in force, by mode, all zero.
    const labels = ['time', 'probe allowed', 'probe shadow-denied', 'api allowed', 'api denied']
    let d = await drawn(page)
    expect(d.labels).toEqual(labels)
    expect(d.data.slice(1).map((a) => a.reduce((n: number, v) => n + (v ?? 0), 0))).toEqual([0, 0, 0, 0])
    await page.screenshot({ path: path.join(RESULTS, 'dashboard-idle.png') })

    // Traffic while the page is open, in two waves; the page catches up with each.
    const statuses: number[] = []
    for (const k of ['key-A', 'key-A', 'key-A', 'key-A', 'key-B']) statuses.push(await send(k))
    // probe: 3 allowed, 2 would-block; api: 5 allowed
    await until(page, [3, 2, 5, 0])
    for (const k of ['key-A', 'key-A', 'key-A', 'key-A', 'key-B', 'key-B']) statuses.push(await send(k))
    expect(statuses.filter((s) => s === 200)).toHaveLength(8)
    expect(statuses.filter((s) => s === 429)).toHaveLength(3)
    // 11 requests: probe 3 allowed + 8 would-block; api: key-A 5 + 3 denied, key-B 3 allowed.
    await until(page, [3, 8, 8, 3])
    const updatesBefore = Number(await page.evaluate(() => document.body.dataset.updates))

    // Data points: one per second, consecutive, each equal to what the server sent for that second.
    d = await drawn(page)
    const xs = d.data[0] as number[]
    expect(d.data.every((a) => a.length === xs.length)).toBe(true)
    expect(xs).toEqual(xs.map((_, i) => (xs[0] as number) + i))
    expect(Math.abs((xs.at(-1) as number) - Date.now() / 1000)).toBeLessThan(5)
    await stream.next(
      (e) => e.event === 'update' && totals(JSON.parse(e.data) as DashboardMessage)['api/denied'] === 3,
    )
    const sent = new Map(merged(stream.events).points.map((p) => [p.t, p]))
    const keys = ['probe/allowed', 'probe/shadow_denied', 'api/allowed', 'api/denied']
    let busy = 0
    xs.forEach((t, i) => {
      const values = keys.map((_, s) => d.data[s + 1]?.[i] ?? 0)
      if (values.some((v) => v > 0)) busy++
      expect({ t, values }).toEqual({ t, values: keys.map((k) => sent.get(t)?.counts[k] ?? 0) })
    })
    expect(busy).toBeGreaterThanOrEqual(1)

    // The totals table and top keys: the gateway's own hashed keys, never the raw API key or address.
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText keeps the cell separators
    const totalsText = await page.locator('#totals tbody').innerText()
    expect(totalsText).toMatch(/probe\s+shadow\s+3\s+0\s+8\s+0\s+3\s+0\s+8\s+0/)
    expect(totalsText).toMatch(/api\s+enforce\s+8\s+3\s+0\s+0\s+8\s+3\s+0\s+0/)
    const [keyA, keyB, ipKey] = await Promise.all([
      keyOf({ rule: 'api', headers: { 'x-api-key': 'key-A' } }),
      keyOf({ rule: 'api', headers: { 'x-api-key': 'key-B' } }),
      keyOf({ rule: 'probe', ip: '127.0.0.1' }),
    ])
    const rows = await page
      .locator('#top-keys tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => Array.from((tr as HTMLTableRowElement).cells).map((c) => c.textContent)),
      )
    expect(rows).toEqual([
      ['probe', '—', ipKey, '11', '3', '0', '8', '0'],
      ['api', '—', keyA, '8', '5', '3', '0', '0'],
      ['api', '—', keyB, '3', '3', '0', '0', '0'],
    ])
    const html = await page.content()
    for (const raw of ['key-A', 'key-B', '127.0.0.1']) expect(html).not.toContain(raw)

    // Store latency: every round trip the gateway timed is in the chart (p50 ≤ p99 ≤ max).
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
    const timed = Number(/edgelimit_store_latency_seconds_count (\d+)/.exec(metrics)?.[1])
    expect(timed).toBeGreaterThanOrEqual(11)
    const [, p50, p99, max, calls] = d.latency as [
      unknown,
      (number | null)[],
      (number | null)[],
      (number | null)[],
      (number | null)[],
    ]
    await page.waitForFunction(
      (want) => {
        const u = (window as unknown as { __dashboard: { charts: { latency: { data: number[][] } } } })
          .__dashboard.charts.latency
        return (u.data[4] as (number | null)[]).reduce((n: number, v) => n + (v ?? 0), 0) === want
      },
      timed,
      { timeout: 10_000 },
    )
    calls.forEach((n, i) => {
      if (n === null) return
      expect(p50[i] as number).toBeGreaterThan(0)
      expect(p50[i] as number).toBeLessThanOrEqual(p99[i] as number)
      expect(p99[i] as number).toBeLessThanOrEqual(max[i] as number)
    })
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText keeps the cell separators
    expect(await page.locator('#breakers tbody').innerText()).toMatch(
      /probe\s+—\s+closed[\s\S]*api\s+—\s+closed/,
    )
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText keeps the cell separators
    expect(await page.locator('#status').innerText()).toBe('live')

    // Still live: updates keep coming once a second.
    await page.waitForFunction((n) => Number(document.body.dataset.updates) >= n + 2, updatesBefore, {
      timeout: 10_000,
    })
    const inked = await page.evaluate(() => {
      const canvas = document.querySelector('#decisions canvas') as HTMLCanvasElement
      const px = (canvas.getContext('2d') as CanvasRenderingContext2D).getImageData(
        0,
        0,
        canvas.width,
        canvas.height,
      ).data
      let n = 0
      for (let i = 3; i < px.length; i += 4) if ((px[i] as number) > 0) n++
      return n
    })
    expect(inked).toBeGreaterThan(1000)
    await page.screenshot({ path: path.join(RESULTS, 'dashboard.png') })
    await page.screenshot({ path: path.join(RESULTS, 'dashboard-full.png'), fullPage: true })
    stream.close()
    await page.close()
    expect(problems).toEqual([])
  })
})

// Rule names are user text: one named like an Object.prototype member is still a rule like any other.
describe.skipIf(!CHROMIUM_AVAILABLE)('rules named like Object.prototype members', () => {
  let browser: Browser
  let origin: Origin
  let gw: InProcess
  const NAMES = ['toString', 'valueOf', 'constructor', 'hasOwnProperty']
  const rules = (names: string[]) =>
    `identity: { secret: s }\nadmin: { token: ${TOKEN} }\nrules:\n${names
      .map((n) => `  - { name: ${n}, match: { path: /${n} }, algorithm: fixed-window, limit: 1, window: 1h }`)
      .join('\n')}\n`
  beforeAll(async () => {
    ;[browser, origin] = await Promise.all([launchChromium(), startOrigin()])
    gw = await startInProcess(rules([...NAMES, 'kept']), { upstream: origin.url })
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.close()
    await origin?.close()
  })

  test('a removed rule is labelled "removed", whatever its name', async () => {
    for (const name of [...NAMES, 'kept']) await rawRequest(`${gw.url}/${name}`)
    writeFileSync(gw.file, rules(['kept']))
    const reload = await fetch(`${gw.admin}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(reload.status).toBe(200)
    const page = await browser.newPage()
    await page.goto(`${gw.admin}/dashboard`)
    await page.waitForFunction(() => document.querySelectorAll('#totals tbody tr').length === 5, undefined, {
      timeout: 20_000,
    })
    const modes = await page
      .locator('#totals tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => [
          (tr as HTMLTableRowElement).dataset.rule,
          (tr as HTMLTableRowElement).cells[1]?.textContent,
        ]),
      )
    expect(Object.fromEntries(modes)).toEqual({
      toString: 'removed',
      valueOf: 'removed',
      constructor: 'removed',
      hasOwnProperty: 'removed',
      kept: 'enforce',
    })
    await page.close()
  })
})

// A store that is down: a rule failing open admits without knowing its state, and the page says
// unknown for it (its own series, columns), never allowed.
describe.skipIf(!CHROMIUM_AVAILABLE)('a rule failing open while the store is down', () => {
  let browser: Browser
  let origin: Origin
  let gw: InProcess
  beforeAll(async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer()
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port
        s.close(() => resolve(p))
      })
    })
    ;[browser, origin] = await Promise.all([launchChromium(), startOrigin()])
    gw = await startInProcess(
      `
store: redis://127.0.0.1:${port}
identity: { secret: s }
rules:
  - { name: strict, match: { path: /closed }, algorithm: gcra, limit: 10, period: 1s, onStoreError: closed, timeout: 50ms }
  - { name: lenient, match: { path: /open }, algorithm: gcra, limit: 10, period: 1s, onStoreError: open, timeout: 50ms }
`,
      { upstream: origin.url, storeTimeoutMs: 100 },
    )
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.close()
    await origin?.close()
  })

  test('its decisions are drawn and tabled as unknown, not allowed', async () => {
    for (let i = 0; i < 3; i++) expect((await rawRequest(`${gw.url}/open`)).status).toBe(200)
    expect((await rawRequest(`${gw.url}/closed`)).status).toBe(503)
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
    const problems: string[] = []
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`)
    })
    await page.goto(`${gw.admin}/dashboard`)
    await page.waitForFunction(() => document.body.dataset.ready === 'true', undefined, { timeout: 20_000 })
    const chart = await page.evaluate(() => {
      const u = (
        window as unknown as {
          __dashboard: { charts: { decisions: { series: { label: string }[]; data: (number | null)[][] } } }
        }
      ).__dashboard.charts.decisions
      return {
        labels: u.series.map((s) => String(s.label)),
        sums: u.data.slice(1).map((a) => Array.from(a).reduce((n: number, v) => n + (v ?? 0), 0)),
      }
    })
    expect(chart).toEqual({
      labels: [
        'time',
        'strict allowed',
        'strict denied',
        'lenient allowed',
        'lenient denied',
        'lenient unknown',
      ],
      sums: [0, 1, 0, 0, 3],
    })
    const cells = (selector: string) =>
      page
        .locator(selector)
        .evaluateAll((trs) =>
          trs.map((tr) => Array.from((tr as HTMLTableRowElement).cells).map((c) => c.textContent)),
        )
    expect(await cells('#totals thead tr')).toEqual([
      [
        'rule',
        'mode',
        'allowed',
        'denied',
        'shadow-denied',
        'unknown',
        'allowed (since start)',
        'denied (since start)',
        'shadow-denied (since start)',
        'unknown (since start)',
      ],
    ])
    expect(await cells('#totals tbody tr')).toEqual([
      ['strict', 'enforce', '0', '1', '0', '0', '0', '1', '0', '0'],
      ['lenient', 'enforce', '0', '0', '0', '3', '0', '0', '0', '3'],
    ])
    expect((await cells('#top-keys tbody tr')).map((row) => [row[0], ...row.slice(3)])).toEqual([
      ['lenient', '3', '0', '0', '0', '3'],
      ['strict', '1', '0', '1', '0', '0'],
    ])
    await page.screenshot({ path: path.join(RESULTS, 'dashboard-store-down.png'), fullPage: true })
    await page.close()
    expect(problems).toEqual([])
  })
})
