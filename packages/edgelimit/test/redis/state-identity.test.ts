/**
 * A rule's state is identified by its name and its policy's fingerprint
 * (docs/decisions/0014-state-identity.md), on real Redis: limiters that reuse a rule name with
 * another policy on one prefix keep apart, a deploy that changes a rule starts it fresh, and an
 * unchanged rule keeps its state across limiters.
 */
import { describe, expect, it } from 'vitest'
import { type AlgorithmSpec, createLimiter, fixedWindow, slidingLog, tokenBucket } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { fingerprint } from '../../src/stores/fingerprint.js'
import { redisFixture } from '../support/redis-client.js'
import { policyOf, stateKey } from '../support/state-key.js'

const fixture = redisFixture()
const T0 = 1_800_000_000_000

function limiter(prefix: string, algorithm: AlgorithmSpec, clock = { now: () => T0 }) {
  return createLimiter({
    rules: [{ name: 'api', algorithm }],
    store: redisStore({ client: fixture.client, prefix, clock: 'client' }),
    clock,
    timeout: false,
    breaker: false,
    denyCache: false,
  })
}

describe('Redis state identity: rule name + policy fingerprint', () => {
  it('two limiters reusing a rule name with different algorithms keep their own counts', async () => {
    const a = limiter('si1', fixedWindow({ limit: 3, window: '60s' }))
    const b = limiter('si1', tokenBucket({ capacity: 3, refillRate: 1, refillInterval: '1m' }))
    const admitted = { a: 0, b: 0 }
    for (let i = 0; i < 10; i++) {
      if ((await a.limit('c1')).allowed) admitted.a++
      if ((await b.limit('c1')).allowed) admitted.b++
    }
    expect(admitted).toEqual({ a: 3, b: 3 })
  })

  it('a sliding log and a bucket under one name do not collide (no WRONGTYPE)', async () => {
    const log = limiter('si2', slidingLog({ limit: 2, window: '60s' }))
    const bucket = limiter('si2', tokenBucket({ capacity: 2, refillRate: 1, refillInterval: '1m' }))
    const reasons: unknown[] = []
    for (let i = 0; i < 3; i++) {
      reasons.push((await log.limit('c1')).reason, (await bucket.limit('c1')).reason)
    }
    expect(reasons).toEqual([undefined, undefined, undefined, undefined, 'limit-exceeded', 'limit-exceeded'])
  })

  it('a deploy that changes a rule (same name and algorithm) starts it fresh', async () => {
    const before = limiter('si3', tokenBucket({ capacity: 10, refillRate: 1 }))
    for (let i = 0; i < 10; i++) await before.limit('c1')
    expect((await before.limit('c1')).allowed).toBe(false)
    const after = limiter('si3', tokenBucket({ capacity: 100, refillRate: 500 }))
    const d = await after.limit('c1')
    expect([d.allowed, d.remaining, d.retryAfterMs]).toEqual([true, 99, 0])
  })

  it('an unchanged rule keeps its state across limiters, under <prefix>:<rule>:<fingerprint>:{<key>}', async () => {
    const spec = fixedWindow({ limit: 3, window: '1h' })
    const first = limiter('si4', spec)
    await first.limit('c1')
    await first.limit('c1')
    const again = limiter('si4', fixedWindow({ limit: 3, window: '1h' }))
    expect((await again.limit('c1')).remaining).toBe(0)
    const key = stateKey('si4', 'api', spec, 'c1')
    expect(key).toMatch(/^si4:api:[0-9a-z]{1,7}:\{c1\}$/)
    expect(await fixture.client.keys('si4:*')).toEqual([key])
  })

  it('the fingerprint is pure and pinned: the same policy gives the same text everywhere', () => {
    // Pinned values: a change here moves every stored state (and must be a deliberate one).
    expect(fingerprint(policyOf(fixedWindow({ limit: 3, window: '60s' })))).toBe(
      fingerprint({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000 }),
    )
    expect(fingerprint({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000 })).toBe('oqgcfz')
    expect(
      fingerprint({ algorithm: 'token-bucket', capacity: 10, refillRate: 1, refillIntervalMs: 1000 }),
    ).toBe('m8texg')
    expect(
      fingerprint({ algorithm: 'token-bucket', capacity: 3, refillRate: 1, refillIntervalMs: 60_000 }),
    ).not.toBe(fingerprint({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000 }))
  })
})
