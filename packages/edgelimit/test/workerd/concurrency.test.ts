// Concurrency: 1,000 simultaneous requests for one key admit exactly the limit, whatever the
// algorithm. Through the example Worker (examples/cloudflare-worker, its built dependencies, one
// Durable Object per client) with limit 100 — the shaping leaky bucket included, whose queued
// requests the Worker accepts with 202 and their place in the queue — and at the store with a
// frozen client clock.

import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { Miniflare } from 'miniflare'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AlgorithmSpec } from '../../src/algorithms.js'
import { fixedWindow, gcra, leakyBucket, slidingLog, slidingWindow, tokenBucket } from '../../src/index.js'
import { farWindow } from '../support/window.js'
import { bundle, COMPATIBILITY_DATE, type Running, root, startWorker, storageDir } from './support/workerd.js'

const N = 1000
const LIMIT = 100
const EXAMPLE_ALGORITHMS = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-bucket',
  'leaky-bucket-shape',
  'gcra',
]
/** The example's window: shaping releases one queued request every WINDOW / LIMIT = 36 s. */
const WINDOW_MS = 3_600_000
/**
 * The epoch-aligned windows count on the object's clock: for them a window whose end the burst
 * cannot cross (an hour's, at XX:00:00, would admit up to 200).
 */
const windowOf = (algorithm: string) => (/^(fixed|sliding)-window$/.test(algorithm) ? farWindow() : '1h')

describe(`example Worker: ${N} concurrent requests from one client, limit ${LIMIT}`, () => {
  let mf: Miniflare
  let dir: string
  beforeAll(async () => {
    dir = storageDir()
    const script = await bundle(join(root, 'examples', 'cloudflare-worker', 'src', 'index.ts'))
    // One Worker per algorithm, configured as wrangler.jsonc's `vars` would.
    mf = new Miniflare({
      durableObjectsPersist: dir,
      workers: EXAMPLE_ALGORITHMS.map((algorithm) => ({
        name: algorithm,
        modules: true,
        script,
        compatibilityDate: COMPATIBILITY_DATE,
        bindings: { ALGORITHM: algorithm, LIMIT: String(LIMIT), WINDOW: windowOf(algorithm) },
        durableObjects: { RATE_LIMITER: { className: 'EdgelimitDurableObject', useSQLite: true } },
      })),
    })
    await mf.ready
  })
  afterAll(async () => {
    await mf?.dispose()
    rmSync(dir, { recursive: true, force: true })
  })

  it.each(EXAMPLE_ALGORITHMS)('%s admits exactly 100', async (algorithm) => {
    const shaping = algorithm === 'leaky-bucket-shape'
    // Through miniflare's entry, routed to this algorithm's Worker, as one client (CF-Connecting-IP).
    const send = (path: string, ip = '203.0.113.7') =>
      mf.dispatchFetch(`http://example.com${path}`, {
        headers: { 'MF-Route-Override': algorithm, 'cf-connecting-ip': ip },
      })
    // Each body is read as soon as its response arrives. Miniflare hands back a Response wrapping
    // the body stream of undici's own Response, which it drops; undici's FinalizationRegistry
    // cancels that stream when the dropped one is collected, so a body left unread while the other
    // 999 arrive can be gone (bodyUsed, empty) under GC pressure. Reading locks the stream first.
    const exchanges = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        send(`/api/items/${i}`).then(async (response) => ({ response, body: await response.text() })),
      ),
    )
    const responses = exchanges.map((e) => e.response)
    const bodies = exchanges.map((e) => e.body)
    const statuses: Record<number, number> = {}
    for (const r of responses) statuses[r.status] = (statuses[r.status] ?? 0) + 1
    const odd = responses.findIndex((r) => ![200, 202, 429].includes(r.status))
    // Shaping admits one request now and queues LIMIT − 1 behind it (202): admitted all the same.
    expect(statuses, odd === -1 ? '' : `${responses[odd]?.status}: ${bodies[odd]}`).toEqual(
      shaping ? { 200: 1, 202: LIMIT - 1, 429: N - LIMIT } : { 200: LIMIT, 429: N - LIMIT },
    )
    if (shaping) {
      // Each queued request has its own place, 1 … 99, due one release interval after the one before
      // (less the time the burst took, well under one interval).
      const queued = bodies
        .filter((_, i) => responses[i]?.status === 202)
        .map((b) => JSON.parse(b) as { queued: boolean; position: number; delayMs: number })
      const release = WINDOW_MS / LIMIT
      expect(queued.map((q) => q.position).sort((a, b) => a - b)).toEqual(
        Array.from({ length: LIMIT - 1 }, (_, i) => i + 1),
      )
      for (const q of queued) {
        expect(q.queued).toBe(true)
        expect(q.delayMs).toBeGreaterThan((q.position - 0.5) * release)
        expect(q.delayMs).toBeLessThanOrEqual(q.position * release)
      }
    }
    const denied = responses.find((r) => r.status === 429)
    expect(denied?.headers.get('content-type')).toBe('application/problem+json')
    expect(denied?.headers.get('ratelimit')).toMatch(/^"api";r=0;t=\d+$/)
    // Another client has its own object and quota.
    const other = await send('/api/items', '198.51.100.1')
    expect(other.status).toBe(200)
    await other.arrayBuffer()
  })
})

describe(`at the store: ${N} concurrent decisions on one key, at one instant`, () => {
  let worker: Running
  beforeAll(async () => {
    worker = await startWorker(join(import.meta.dirname, 'support', 'worker.ts'), {
      durableObjects: { LIMITER: 'EdgelimitDurableObject' },
    })
  })
  afterAll(() => worker?.dispose())

  const algorithms: Record<string, AlgorithmSpec> = {
    'fixed-window': fixedWindow({ limit: LIMIT, window: '1h' }),
    'sliding-log': slidingLog({ limit: LIMIT, window: '1h' }),
    'sliding-window': slidingWindow({ limit: LIMIT, window: '1h' }),
    'token-bucket': tokenBucket({ capacity: LIMIT, refillRate: 1, refillInterval: '1h' }),
    'leaky-bucket (police)': leakyBucket({ capacity: LIMIT, leakRate: 1, leakInterval: '1h' }),
    // A queue of 99 behind the one in service: 100 admitted, the last held 99 s.
    'leaky-bucket (shape)': leakyBucket({
      capacity: LIMIT - 1,
      leakRate: 1,
      leakInterval: '1s',
      mode: 'shape',
    }),
    gcra: gcra({ limit: 1, period: '1h', burst: LIMIT }),
  }

  it.each(Object.entries(algorithms))('%s admits exactly 100', async (_name, algorithm) => {
    const res = await worker.fetch('/burst', {
      method: 'POST',
      body: JSON.stringify({ algorithm, n: N, at: 1_700_000_000_000 }),
    })
    expect(await res.json()).toEqual({ admitted: LIMIT, limit: LIMIT })
  })
})
