/**
 * `edgelimit replay` counts what the gateway counts. The same access log is (1) replayed with a
 * multi-rule shadow policy, and (2) sent line by line as real HTTP requests through a running
 * gateway (in-process, real sockets, a real origin) with the same policy, its clock set to each
 * line's time before the line is sent. Per rule, the would-block counts (from the gateway's
 * `/metrics`), the requests each rule decided, and the denials of every key (from the gateway's
 * "shadow: would block" log lines) must be exactly equal.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import path from 'node:path'
import { manualClock } from 'edgelimit/testing'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createHasher } from '../../src/policy/key.js'
import { type ReplayResult, runReplay } from '../../src/replay/index.js'
import { type InProcess, startInProcess, tempDir, writePolicy } from '../support/gateway.js'
import { type Origin, startOrigin } from '../support/origin.js'
import { accessLog } from './generate-log.js'
import { captureIo } from './io.js'

const SAMPLE = path.resolve(__dirname, '../../../../../shared/data/apache_access_sample.log')

// Every rule in shadow: nothing is blocked, each rule decides every request it matches. Four rules
// count by client address alone (replay decides them with one shared store call; the gateway has
// a limiter each), the others match a route, key by route, user agent or query, or pick a tier.
const POLICY = `
identity:
  trustedProxies: ['127.0.0.1/32']
rules:
  - name: per-ip
    mode: shadow
    algorithm: sliding-window
    limit: 60
    window: 1m
  - name: burst
    mode: shadow
    algorithm: token-bucket
    capacity: 10
    refillRate: 1
  - name: hourly
    mode: shadow
    algorithm: sliding-log
    limit: 100
    window: 1h
  - name: pace
    mode: shadow
    algorithm: gcra
    limit: 20
    period: 30s
  - name: feeds
    mode: shadow
    match: { path: "/**.xml" }
    key: [ip, route]
    algorithm: fixed-window
    limit: 1
    window: 10m
  - name: pages
    mode: shadow
    match: { path: ["/presentations/**", "/static/**"] }
    key: route
    algorithm: leaky-bucket
    capacity: 40
    leakRate: 1
    leakInterval: 1s
  - name: login
    mode: shadow
    match: { path: /login, methods: [POST] }
    algorithm: fixed-window
    limit: 3
    window: 1m
  - name: search
    mode: shadow
    match: { path: /api/search }
    key: [ip, "query:q"]
    algorithm: sliding-window
    limit: 5
    window: 1m
  - name: agents
    mode: shadow
    key: header:user-agent
    algorithm: gcra
    limit: 120
    period: 1m
    tiers:
      keys:
        "UniversalFeedParser/4.2-pre-314-svn +http://feedparser.org/": strict
        "curl/8.5.0": strict
      default: normal
      plans: { normal: { limit: 120 }, strict: { limit: 2, period: 10m } }
`

/** One log line as the client sent it. */
interface Sent {
  ts: number
  ip: string
  method: string
  target: string
  ua: string | undefined
}

const MONTHS = 'JanFebMarAprMayJunJulAugSepOctNovDec'
const LINE =
  /^(\S+) \S+ \S+ \[(\d\d)\/(\w{3})\/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)\] "(\S+) (\S+)[^"]*" \d{3} \S+(?: "[^"]*" "([^"]*)")?/

/** Reads a Combined Log Format file on its own terms (not with replay's parser), in time order. */
function requestsOf(log: string): Sent[] {
  const out: Sent[] = []
  for (const line of log.split('\n')) {
    if (line === '') continue
    const m = LINE.exec(line)
    if (m === null) throw new Error(`not a log line: ${line}`)
    const [, ip, d, mon, y, h, mi, s, sign, zh, zm, method, target, ua] = m as unknown as string[]
    const n = (v: string | undefined) => Number(v)
    const zone = (sign === '-' ? -1 : 1) * (n(zh) * 60 + n(zm)) * 60_000
    const ts = Date.UTC(n(y), MONTHS.indexOf(mon as string) / 3, n(d), n(h), n(mi), n(s)) - zone
    out.push({
      ts,
      ip: ip as string,
      method: method as string,
      target: target as string,
      ua: ua === undefined || ua === '' || ua === '-' ? undefined : ua,
    })
  }
  // Stable: equal times keep file order, as replay's reorder window releases them.
  return out.sort((a, b) => a.ts - b.ts)
}

let origin: Origin
let gw: InProcess
const clock = manualClock(0)
const agent = new Agent({ keepAlive: true, maxSockets: 1 })

beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  agent.destroy()
  await origin?.close()
})

/** Sends each request in time order, the gateway's clock at the request's time, one at a time. */
async function sendAll(requests: readonly Sent[], url: string): Promise<number[]> {
  const statuses: number[] = []
  for (const r of requests) {
    clock.set(r.ts)
    const headers: Record<string, string> = { 'x-forwarded-for': r.ip }
    if (r.ua !== undefined) headers['user-agent'] = r.ua
    statuses.push(
      await new Promise<number>((resolve, reject) => {
        const req = request(`${url}${r.target}`, { method: r.method, headers, agent }, (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
          res.on('error', reject)
        })
        req.on('error', reject)
        req.end()
      }),
    )
  }
  return statuses
}

/** `metric{rule="…",tier="…"…} n` summed per rule. */
function perRule(metrics: string, name: string, outcome?: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue
    const labels = Object.fromEntries(
      [...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] as string, m[2] as string]),
    )
    if (outcome !== undefined && labels.outcome !== outcome) continue
    const rule = labels.rule as string
    out.set(rule, (out.get(rule) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)))
  }
  return out
}

/** The store key the gateway hashes for a rule's raw key (parts joined with `|`, as replay reports it). */
function storeKey(parts: readonly string[], raw: string, hash: (d: string) => string): string {
  if (raw.startsWith('fallback|ip=')) return hash(raw)
  const values = raw.split('|')
  // The last part takes any `|` of its own value.
  const split = [...values.slice(0, parts.length - 1), values.slice(parts.length - 1).join('|')]
  return hash(parts.map((p, i) => `${p}=${encodeURIComponent(split[i] as string)}`).join('|'))
}

async function compare(logFile: string, expectedRequests: number) {
  const dir = tempDir()
  const policy = writePolicy(dir, POLICY)

  // 1. replay, through the CLI, every denied key listed.
  const io = captureIo(dir)
  const code = await runReplay(
    [logFile, '--config', policy, '--json', 'r.json', '--no-html', '--top', '100000'],
    io,
  )
  expect(code, io.err()).toBe(0)
  const replay = JSON.parse(readFileSync(path.join(dir, 'r.json'), 'utf8')) as ReplayResult
  expect(replay.requests).toBe(expectedRequests)
  expect(replay.malformed.count).toBe(0)
  // Both sides see the same times: every line was put back in order, none was clamped.
  expect(replay.late.count).toBe(0)

  // 2. the gateway, the same lines as HTTP requests.
  const requests = requestsOf(readFileSync(logFile, 'utf8'))
  expect(requests.length).toBe(expectedRequests)
  gw = await startInProcess(POLICY, { upstream: origin.url, clock })
  const before = origin.requests
  let metrics: string
  try {
    const statuses = await sendAll(requests, gw.url)
    // Shadow: nothing blocked, every request reached the origin.
    expect(statuses.filter((s) => s !== 200)).toEqual([])
    expect(origin.requests - before).toBe(expectedRequests)
    metrics = await fetch(`${gw.admin}/metrics`).then((r) => r.text())
  } finally {
    await gw.close()
  }
  const wouldBlock = perRule(metrics, 'edgelimit_shadow_would_block_total')
  const decided = perRule(metrics, 'edgelimit_decisions_total')
  const gatewayKeys = new Map<string, Map<string, number>>()
  for (const l of gw.logs) {
    if (l.msg !== 'shadow: would block') continue
    const byKey = gatewayKeys.get(l.rule as string) ?? new Map<string, number>()
    byKey.set(l.key as string, (byKey.get(l.key as string) ?? 0) + 1)
    gatewayKeys.set(l.rule as string, byKey)
  }

  // 3. equal, rule by rule and key by key.
  const hasher = createHasher(undefined)
  const rows = replay.rules.map((r) => ({
    rule: r.name,
    replay: { matched: r.matched, denied: r.denied },
    gateway: { matched: decided.get(r.name) ?? 0, denied: wouldBlock.get(r.name) ?? 0 },
  }))
  expect(rows.map((r) => ({ rule: r.rule, ...r.gateway }))).toEqual(
    rows.map((r) => ({ rule: r.rule, ...r.replay })),
  )
  for (const r of replay.rules) {
    expect(r.deniedKeysExact).toBe(true)
    expect(r.topDenied.length).toBe(r.deniedKeys)
    const fromReplay = new Map(
      r.topDenied.map(([raw, n]) => [storeKey(r.key, raw, (d) => hasher.hash(d)), n] as const),
    )
    expect(gatewayKeys.get(r.name) ?? new Map(), r.name).toEqual(fromReplay)
  }
  return rows
}

describe('replay counts what the gateway counts in shadow mode, for the same traffic', () => {
  test('the real sample log (10,000 lines, 1,753 clients, out of time order by up to 59 s)', async () => {
    const rows = await compare(SAMPLE, 10_000)
    const denied = Object.fromEntries(rows.map((r) => [r.rule, r.replay.denied]))
    // Not a vacuous comparison: the rules that can bite on this traffic do.
    for (const rule of ['per-ip', 'burst', 'hourly', 'pace', 'feeds', 'pages', 'agents'])
      expect(denied[rule], rule).toBeGreaterThan(0)
  }, 180_000)

  test('a generated log (8,000 lines, 150 skewed clients, logins and searches, 20 s out of order)', async () => {
    const file = path.join(tempDir(), 'generated.log')
    const chunks: Buffer[] = []
    for await (const c of accessLog({ lines: 8_000, clients: 150, rate: 20, seed: 11 }))
      chunks.push(Buffer.from(c))
    writeFileSync(file, Buffer.concat(chunks))
    const rows = await compare(file, 8_000)
    const denied = Object.fromEntries(rows.map((r) => [r.rule, r.replay.denied]))
    for (const rule of ['per-ip', 'burst', 'hourly', 'pace', 'feeds', 'pages', 'login', 'search', 'agents'])
      expect(denied[rule], rule).toBeGreaterThan(0)
  }, 180_000)
})

// Enforced rules, three of them for 30 % of keys only: the gateway blocks a denied request only
// when its key (the HMAC of the key parts under `identity.secret`) falls in the rule's share, and
// counts any other denial as a shadow denial that lets the request on to the next rule.
const ENFORCE_POLICY = `
identity:
  trustedProxies: ['127.0.0.1/32']
  secret: replay-equivalence-secret
rules:
  - name: pages
    match: { path: ["/presentations/**", "/static/**"] }
    key: [ip, route]
    algorithm: fixed-window
    limit: 3
    window: 10m
    enforce: 30
  - name: per-ip
    algorithm: sliding-window
    limit: 20
    window: 1m
    enforce: 30
  - name: agents
    key: header:user-agent
    algorithm: gcra
    limit: 120
    period: 1m
    enforce: 30
    tiers:
      keys:
        "UniversalFeedParser/4.2-pre-314-svn +http://feedparser.org/": strict
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)": strict
        "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:27.0) Gecko/20100101 Firefox/27.0": strict
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/32.0.1700.107 Safari/537.36": strict
        "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:27.0) Gecko/20100101 Firefox/27.0": strict
      default: normal
      plans: { normal: { limit: 120 }, strict: { limit: 2, period: 10m } }
  - name: hourly
    algorithm: sliding-log
    limit: 150
    window: 1h
`

describe('replay --mode enforce blocks what the gateway blocks, rules enforced for a share of keys', () => {
  test('the real sample log, rules at enforce: 30', async () => {
    const dir = tempDir()
    const policy = writePolicy(dir, ENFORCE_POLICY)
    const io = captureIo(dir)
    const code = await runReplay(
      [SAMPLE, '--config', policy, '--mode', 'enforce', '--json', 'r.json', '--no-html'],
      io,
    )
    expect(code, io.err()).toBe(0)
    const replay = JSON.parse(readFileSync(path.join(dir, 'r.json'), 'utf8')) as ReplayResult
    expect(replay.late.count).toBe(0)

    const requests = requestsOf(readFileSync(SAMPLE, 'utf8'))
    gw = await startInProcess(ENFORCE_POLICY, { upstream: origin.url, clock })
    let statuses: number[]
    let metrics: string
    try {
      statuses = await sendAll(requests, gw.url)
      metrics = await fetch(`${gw.admin}/metrics`).then((r) => r.text())
    } finally {
      await gw.close()
    }
    const decided = perRule(metrics, 'edgelimit_decisions_total')
    const blocked = perRule(metrics, 'edgelimit_decisions_total', 'denied')
    const shadowDenied = perRule(metrics, 'edgelimit_decisions_total', 'shadow_denied')
    const rows = replay.rules.map((r) => ({
      rule: r.name,
      replay: { matched: r.matched, denied: r.denied },
      gateway: {
        matched: decided.get(r.name) ?? 0,
        denied: (blocked.get(r.name) ?? 0) + (shadowDenied.get(r.name) ?? 0),
      },
    }))
    expect(rows.map((r) => ({ rule: r.rule, ...r.gateway }))).toEqual(
      rows.map((r) => ({ rule: r.rule, ...r.replay })),
    )
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([])
    expect(replay.blocked).toBe(statuses.filter((s) => s === 429).length)
    // Not vacuous: each partly enforced rule both blocks and lets denied requests through.
    for (const rule of ['pages', 'per-ip', 'agents']) {
      expect(blocked.get(rule), rule).toBeGreaterThan(0)
      expect(shadowDenied.get(rule), rule).toBeGreaterThan(0)
    }
  }, 180_000)
})
