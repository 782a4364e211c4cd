// Load test: 50 connections for 10 s against the Node adapter (memory store, one shared key) with
// a token bucket of 5,000 that refills one token per hour, so exactly 5,000 requests are admitted
// during the run and every later one is denied. Every response is checked twice: client-side
// (autocannon's onResponse hands each response's status, body and headers) and server-side (the
// headers the adapter set, in the order the server answered), and the counts are cross-checked
// with autocannon's own status counts.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import autocannon from 'autocannon'
import { parseItem, parseList } from 'structured-headers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { nodeRateLimit } from '../../src/adapters/node.js'
import { createLimiter, tokenBucket } from '../../src/index.js'

const CAPACITY = 5_000
const CONNECTIONS = 50
const DURATION_S = 10
const POLICY = `"bucket";q=${CAPACITY};w=${CAPACITY * 3600}`
const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

/** What one side saw: status counts, and `r` of every admitted response in arrival order. */
interface Seen {
  status: Map<number, number>
  remaining: number[]
  problems: string[]
}

const seen = (): Seen => ({ status: new Map(), remaining: [], problems: [] })

// Parsing is cached per distinct field value: the server shares the CPU with autocannon.
const listCache = new Map<string, ReturnType<typeof parseList>>()
function list(value: string): ReturnType<typeof parseList> {
  let parsed = listCache.get(value)
  if (parsed === undefined) {
    parsed = parseList(value)
    listCache.set(value, parsed)
  }
  return parsed
}

/** The one `"bucket"` member of a RateLimit field: [r, t]. */
function rateLimit(value: string): [number, number] {
  const members = list(value)
  const [name, params] = members[0] ?? []
  if (members.length !== 1 || name !== 'bucket') throw new Error(`RateLimit: ${value}`)
  const r = params?.get('r')
  const t = params?.get('t')
  if (!Number.isInteger(r) || !Number.isInteger(t) || (t as number) < 0)
    throw new Error(`RateLimit: ${value}`)
  return [r as number, t as number]
}

/**
 * Checks one response's headers (lower-case names) and body, records it, and returns nothing; a
 * problem is recorded as text rather than thrown, so one bad response cannot stop the load.
 */
function record(into: Seen, status: number, header: (name: string) => string | undefined, body?: string) {
  into.status.set(status, (into.status.get(status) ?? 0) + 1)
  try {
    const policy = header('ratelimit-policy')
    if (policy === undefined || list(policy).length !== 1 || policy !== POLICY)
      throw new Error(`RateLimit-Policy: ${policy}`)
    const [r] = rateLimit(header('ratelimit') ?? '')
    if (status === 200) {
      if (header('retry-after') !== undefined) throw new Error('Retry-After on a 200')
      if (body !== undefined && body !== 'ok') throw new Error(`body ${body}`)
      into.remaining.push(r)
    } else if (status === 429) {
      const retryAfter = parseItem(header('retry-after') ?? '')[0]
      if (!Number.isInteger(retryAfter) || (retryAfter as number) < 1)
        throw new Error(`Retry-After ${retryAfter}`)
      if (r !== 0) throw new Error(`r=${r} on a 429`)
      if (header('content-type') !== 'application/problem+json') throw new Error(header('content-type'))
      if (header('cache-control') !== 'no-store') throw new Error(header('cache-control'))
      if (body !== undefined) {
        const problem = JSON.parse(body)
        if (
          problem.type !== QUOTA_EXCEEDED ||
          problem.status !== 429 ||
          problem.retryAfter !== retryAfter ||
          JSON.stringify(problem['violated-policies']) !== '["bucket"]'
        )
          throw new Error(`problem ${body}`)
      }
    } else throw new Error(`status ${status}`)
  } catch (error) {
    if (into.problems.length < 20) into.problems.push(`${status}: ${(error as Error).message}`)
    else into.problems.length++
  }
}

describe('load: 50 connections for 10 s through the Node adapter', () => {
  const server: Seen = seen()
  const client: Seen = seen()
  let http: Server
  let result: Awaited<ReturnType<typeof autocannon>>

  beforeAll(async () => {
    const limiter = createLimiter({
      rules: [
        {
          name: 'bucket',
          algorithm: tokenBucket({ capacity: CAPACITY, refillRate: 1, refillInterval: '1h' }),
        },
      ],
    })
    const limit = nodeRateLimit({ limiter, key: () => 'everyone' })
    http = createServer((req, res) => {
      limit(req, res).then(
        (proceed) => {
          if (proceed) res.end('ok')
          const header = (name: string) => res.getHeader(name) as string | undefined
          record(server, res.statusCode, header)
        },
        (error) => {
          res.statusCode = 500
          res.end(String(error))
          record(server, 500, () => undefined)
        },
      )
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    const port = (http.address() as AddressInfo).port
    result = await autocannon({
      url: `http://127.0.0.1:${port}/`,
      connections: CONNECTIONS,
      duration: DURATION_S,
      requests: [
        {
          onResponse: (status, body, _context, headers) => {
            const lower = new Map(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]))
            record(client, status, (name) => lower.get(name), body)
          },
        },
      ],
    })
    http.closeAllConnections()
    await new Promise((resolve) => http.close(resolve))
  }, 60_000)

  afterAll(() => {
    http?.closeAllConnections()
  })

  it('sends far more requests than the policy admits, with no errors', () => {
    const rps = Math.round(result.requests.average)
    console.info(
      `load: ${result.requests.total} responses in ${result.duration} s (${rps} req/s), ` +
        `${result['2xx']} × 200, ${result['4xx']} × 429; server answered ${[...server.status.values()].reduce((a, b) => a + b, 0)}`,
    )
    expect([result.errors, result.timeouts, result.non2xx - result['4xx']]).toEqual([0, 0, 0])
    expect(result.requests.total).toBeGreaterThan(CAPACITY)
  })

  it('admits exactly what the policy admits: 5,000 200s, everything else 429', () => {
    expect(server.status.get(200)).toBe(CAPACITY)
    expect(client.status.get(200)).toBe(CAPACITY)
    expect(result['2xx']).toBe(CAPACITY)
    expect([...server.status.keys()].sort()).toEqual([200, 429])
    expect([...client.status.keys()].sort()).toEqual([200, 429])
  })

  it("autocannon's counts match every response seen; the server answered at most the in-flight ones more", () => {
    expect(client.status.get(429)).toBe(result['4xx'])
    expect(result.statusCodeStats).toEqual({ 200: { count: CAPACITY }, 429: { count: result['4xx'] } })
    const extra = (server.status.get(429) ?? 0) - (client.status.get(429) ?? 0)
    expect(extra).toBeGreaterThanOrEqual(0)
    expect(extra).toBeLessThanOrEqual(CONNECTIONS)
  })

  it('every 200 and 429 carries correct, consistent headers (and problem+json on 429s)', () => {
    expect(server.problems).toEqual([])
    expect(client.problems).toEqual([])
  })

  it('remaining strictly decreases over admitted responses in server order, from 4,999 to 0', () => {
    const expected = Array.from({ length: CAPACITY }, (_, i) => CAPACITY - 1 - i)
    expect(server.remaining).toEqual(expected)
    // Clients see them in any order across connections, but each value exactly once.
    expect([...client.remaining].sort((a, b) => b - a)).toEqual(expected)
  })
})
