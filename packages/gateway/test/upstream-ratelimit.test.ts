// An upstream's own rate-limit fields, over real HTTP: the gateway adds its view to them and never
// makes the upstream's look more permissive (draft-10 §7.2), whatever standard it speaks.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { manualClock } from 'edgelimit/testing'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type InProcess, rawRequest, startInProcess } from './support/gateway.js'

// A minute boundary, so that the gateway's fixed window has 60 s to go.
const NOW = 1_750_000_020_000
const RULE = `
rules:
  - { name: edge, algorithm: fixed-window, limit: 100, window: 60s }
`

let origin: Server
let upstream: string
const gateways: InProcess[] = []

beforeAll(async () => {
  // Answers with the status of `x-status` and the header lines of `x-reply` (JSON, flat).
  origin = createServer((req, res) => {
    const lines = JSON.parse(String(req.headers['x-reply'] ?? '[]')) as string[]
    res.writeHead(Number(req.headers['x-status'] ?? 200), lines)
    res.end('origin')
  })
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r))
  upstream = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`
})
afterAll(async () => {
  for (const gw of gateways) await gw.close()
  await new Promise((r) => origin.close(r))
})

async function gateway(headers: string): Promise<InProcess> {
  const gw = await startInProcess(`headers: ${headers}\n${RULE}`, { upstream, clock: manualClock(NOW) })
  gateways.push(gw)
  return gw
}

/** One request through `gw`, the origin answering `status` with the header `lines`. */
async function through(gw: InProcess, lines: string[], status = 200) {
  const response = await rawRequest(`${gw.url}/x`, {
    headers: { 'x-reply': JSON.stringify(lines), 'x-status': String(status) },
  })
  return { status: response.status, headers: response.headers, raw: response.rawHeaders }
}

describe('draft-10: the upstream’s list members come first, then the gateway’s', () => {
  let gw: InProcess
  beforeAll(async () => {
    gw = await gateway('draft-10')
  })

  test('an upstream 429 keeps its exhausted member next to the gateway’s', async () => {
    const answer = await through(
      gw,
      ['RateLimit', '"origin";r=0;t=1800', 'RateLimit-Policy', '"origin";q=10;w=3600', 'Retry-After', '1800'],
      429,
    )
    expect(answer.status).toBe(429)
    expect(answer.headers.ratelimit).toMatch(/^"origin";r=0;t=1800, "edge";r=\d+;t=60$/)
    expect(answer.headers['ratelimit-policy']).toBe('"origin";q=10;w=3600, "edge";q=100;w=60')
    expect(answer.headers['retry-after']).toBe('1800')
    // One line each: the combined value, not the gateway's beside the upstream's.
    expect(answer.raw.filter((h) => h.toLowerCase() === 'ratelimit')).toHaveLength(1)
  })

  test('fields the upstream splits over several lines are combined whole', async () => {
    const answer = await through(gw, ['RateLimit', '"a";r=3;t=9', 'RateLimit', '"b";r=7;t=30'])
    expect(answer.headers.ratelimit).toMatch(/^"a";r=3;t=9, "b";r=7;t=30, "edge";r=\d+;t=60$/)
    expect(answer.headers['ratelimit-policy']).toBe('"edge";q=100;w=60')
  })

  test('without fields of its own the upstream’s answer gets the gateway’s alone', async () => {
    const answer = await through(gw, [])
    expect(answer.headers.ratelimit).toMatch(/^"edge";r=\d+;t=60$/)
    expect(answer.headers['ratelimit-policy']).toBe('"edge";q=100;w=60')
  })

  test('a field the upstream names in Connection is hop-by-hop: not combined, the gateway’s alone', async () => {
    const answer = await through(gw, ['Connection', 'ratelimit', 'RateLimit', '"hop";r=0;t=5'])
    expect(answer.headers.ratelimit).toMatch(/^"edge";r=\d+;t=60$/)
  })

  test('a field in another draft’s form is relayed as the upstream sent it', async () => {
    const answer = await through(gw, ['RateLimit', 'limit=10, remaining=0, reset=1800'])
    expect(answer.headers.ratelimit).toBe('limit=10, remaining=0, reset=1800')
    expect(answer.headers['ratelimit-policy']).toBe('"edge";q=100;w=60')
  })
})

describe('draft-7: the RateLimit with less remaining goes out, with its own policy alone', () => {
  let gw: InProcess
  beforeAll(async () => {
    gw = await gateway('draft-7')
  })

  test('the upstream’s exhausted quota stands', async () => {
    const answer = await through(
      gw,
      ['RateLimit', 'limit=10, remaining=0, reset=1800', 'RateLimit-Policy', '10;w=3600'],
      429,
    )
    expect(answer.headers.ratelimit).toBe('limit=10, remaining=0, reset=1800')
    // The policy of the RateLimit sent, not the gateway's listed beside it (draft-7 §3.5).
    expect(answer.headers['ratelimit-policy']).toBe('10;w=3600')
  })

  test('the gateway’s pair replaces the upstream’s when it has less left, policy too', async () => {
    const answer = await through(gw, [
      'RateLimit',
      'limit=1000, remaining=999, reset=1',
      'RateLimit-Policy',
      '1000;w=1',
    ])
    expect(answer.headers.ratelimit).toMatch(/^limit=100, remaining=\d\d, reset=60$/)
    expect(answer.headers['ratelimit-policy']).toBe('100;w=60')
  })

  test('an upstream policy without its RateLimit tells no remaining: the upstream’s pair stands', async () => {
    const answer = await through(gw, ['RateLimit-Policy', '1000;w=1'])
    expect(answer.headers.ratelimit).toBeUndefined()
    expect(answer.headers['ratelimit-policy']).toBe('1000;w=1')
  })

  test('the gateway’s stands when it has less left than the upstream', async () => {
    const answer = await through(gw, ['RateLimit', 'limit=1000, remaining=500, reset=30'])
    expect(answer.headers.ratelimit).toMatch(/^limit=100, remaining=\d\d, reset=60$/)
    expect(answer.headers['ratelimit-policy']).toBe('100;w=60')
  })
  test('blank upstream fields say nothing: the gateway’s pair goes out', async () => {
    for (const lines of [
      ['RateLimit', ''],
      ['RateLimit', ' ', 'RateLimit-Policy', ''],
    ]) {
      const answer = await through(gw, lines)
      expect(answer.headers.ratelimit).toMatch(/^limit=100, remaining=\d\d, reset=60$/)
      expect(answer.headers['ratelimit-policy']).toBe('100;w=60')
    }
  })
})

describe('draft-6 and legacy: each group of fields is the upstream’s or the gateway’s, never mixed', () => {
  let gw: InProcess
  beforeAll(async () => {
    gw = await gateway('[draft-6, legacy]')
  })

  test('the upstream’s groups stand when they have less left', async () => {
    const answer = await through(gw, [
      'RateLimit-Limit',
      '10',
      'RateLimit-Remaining',
      '0',
      'RateLimit-Reset',
      '1800',
      'X-RateLimit-Limit',
      '10',
      'X-RateLimit-Remaining',
      '0',
    ])
    expect(answer.headers['ratelimit-limit']).toBe('10')
    expect(answer.headers['ratelimit-remaining']).toBe('0')
    expect(answer.headers['ratelimit-reset']).toBe('1800')
    // Not the gateway's policy beside the upstream's limit: the group is the upstream's.
    expect(answer.headers['ratelimit-policy']).toBeUndefined()
    expect(answer.headers['x-ratelimit-limit']).toBe('10')
    expect(answer.headers['x-ratelimit-remaining']).toBe('0')
    expect(answer.headers['x-ratelimit-reset']).toBeUndefined()
  })

  test('the gateway’s group replaces the upstream’s when it has less left', async () => {
    const answer = await through(gw, [
      'X-RateLimit-Limit',
      '5000',
      'X-RateLimit-Remaining',
      '4999',
      'X-RateLimit-Reset',
      '1',
      'X-RateLimit-Used',
      '1',
      'X-RateLimit-Resource',
      'core',
      'RateLimit-Remaining',
      'many',
    ])
    expect(answer.headers['x-ratelimit-limit']).toBe('100')
    expect(answer.headers['x-ratelimit-remaining']).toMatch(/^\d\d$/)
    expect(answer.headers['x-ratelimit-reset']).toBe(String(NOW / 1000 + 60))
    // The rest of the upstream's group goes with it: its resource and use are not the gateway's.
    expect(answer.headers['x-ratelimit-used']).toBeUndefined()
    expect(answer.headers['x-ratelimit-resource']).toBeUndefined()
    // An unreadable remaining tells nothing: kept as sent, with the rest of its group.
    expect(answer.headers['ratelimit-remaining']).toBe('many')
    expect(answer.headers['ratelimit-limit']).toBeUndefined()
  })

  test('the gateway’s draft-6 group replaces all four of the upstream’s, policy too', async () => {
    const answer = await through(gw, [
      'RateLimit-Limit',
      '1000',
      'RateLimit-Remaining',
      '999',
      'RateLimit-Reset',
      '1',
      'RateLimit-Policy',
      '1000;w=1',
    ])
    expect(answer.headers['ratelimit-limit']).toBe('100')
    expect(answer.headers['ratelimit-remaining']).toMatch(/^\d\d$/)
    expect(answer.headers['ratelimit-reset']).toBe('60')
    expect(answer.headers['ratelimit-policy']).toBe('100;w=60')
  })
})
