/**
 * Approximate consistency on a real redis-server (test/support/redis-client.ts), driven by a
 * manual clock: `limiter.reset` and the counter's eviction of keys (with room for 10 keys instead
 * of 100,000, through the same `create` that `approximate` holds).
 */
import { describe, expect, it } from 'vitest'
import { approximate, createLimiter, type Duration, fixedWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { type ApproximateConsistency, createApproximate } from '../../src/resilience/approximate.js'
import { manualClock } from '../../src/testing/index.js'
import { redisFixture } from '../support/redis-client.js'

const fixture = redisFixture()
const T0 = 1_700_000_000_000

/** The count a fixed window holds in Redis ("windowIndex:count"). */
async function stored(key: string): Promise<number> {
  const value = await fixture.client.get(key)
  return value === null ? 0 : Number(value.split(':')[1])
}

/** One fixed-window rule (per hour) counted in process and synced to the fixture's Redis. */
function onRedis(o: {
  prefix: string
  limit: number
  consistency: ApproximateConsistency
  syncInterval: Duration
}) {
  return createLimiter({
    rules: [
      {
        name: 'api',
        algorithm: fixedWindow({ limit: o.limit, window: '1h' }),
        consistency: o.consistency,
        syncInterval: o.syncInterval,
      },
    ],
    store: redisStore({ client: fixture.client, prefix: o.prefix, clock: 'client' }),
    clock: manualClock(T0),
    timeout: false,
    breaker: false,
  })
}

describe('approximate consistency on Redis', () => {
  it('limiter.reset(key) forgets the in-process counts too, pending ones included', async () => {
    const limiter = onRedis({ prefix: 'ar', limit: 3, consistency: approximate, syncInterval: '1s' })
    const four = async () => {
      const out: boolean[] = []
      for (let i = 0; i < 4; i++) out.push((await limiter.limit('k')).allowed)
      return out
    }
    // The first call is the store's (count 1); the next two are counted here, pending a sync.
    expect(await four()).toEqual([true, true, true, false])
    await limiter.reset('k')
    expect(await fixture.client.exists('ar:api:{k}')).toBe(0)
    // A fresh key again, here as in Redis; the admissions from before the reset are never synced.
    expect(await four()).toEqual([true, true, true, false])
    await limiter.flush()
    expect(await stored('ar:api:{k}')).toBe(3)
  })

  it('a key evicted with admissions not synced yet has them charged to the store, not dropped', async () => {
    const small: ApproximateConsistency = {
      mode: 'approximate',
      create: (context) => createApproximate(context, 10),
    }
    const limiter = onRedis({ prefix: 'ae', limit: 100, consistency: small, syncInterval: '10s' })
    const admitted = async (key: string, calls: number) => {
      let n = 0
      for (let i = 0; i < calls; i++) if ((await limiter.limit(key)).allowed) n++
      return n
    }
    // One call to the store, then 99 admitted here: all pending until the next sync, 10 s away.
    expect(await admitted('victim', 100)).toBe(100)
    expect(await stored('ae:api:{victim}')).toBe(1)
    // 50 other keys push the victim out of the 10 entries, more than once.
    for (let i = 0; i < 50; i++) await limiter.limit(`other${i}`)
    await limiter.flush()
    expect(await stored('ae:api:{victim}')).toBe(100)
    expect(await admitted('victim', 100)).toBe(0)
  })
})
