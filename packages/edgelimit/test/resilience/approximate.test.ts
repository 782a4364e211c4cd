/**
 * Approximate consistency on a real redis-server (test/support/redis-client.ts), driven by a
 * manual clock: `limiter.reset` and the counter's eviction of keys.
 */
import { describe, expect, it } from 'vitest'
import { approximate, createLimiter, fixedWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { manualClock } from '../../src/testing/index.js'
import { redisFixture } from '../support/redis-client.js'

const fixture = redisFixture()
const T0 = 1_700_000_000_000

/** The count a fixed window holds in Redis ("windowIndex:count"). */
async function stored(key: string): Promise<number> {
  const value = await fixture.client.get(key)
  return value === null ? 0 : Number(value.split(':')[1])
}

describe('approximate consistency on Redis', () => {
  it('limiter.reset(key) forgets the in-process counts too, pending ones included', async () => {
    const clock = manualClock(T0)
    const limiter = createLimiter({
      rules: [
        {
          name: 'api',
          algorithm: fixedWindow({ limit: 3, window: '1h' }),
          consistency: approximate,
          syncInterval: '1s',
        },
      ],
      store: redisStore({ client: fixture.client, prefix: 'ar', clock: 'client' }),
      clock,
      timeout: false,
      breaker: false,
    })
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
})
