import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createLimiter, fixedWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { type RedisServer, startRedis } from '../support/redis.js'

let redis: RedisServer
let client: Redis
beforeAll(async () => {
  redis = await startRedis()
  client = new Redis({ port: redis.port, host: redis.host, enableOfflineQueue: false })
  await new Promise((resolve) => client.once('ready', resolve))
})
afterAll(async () => {
  await client?.quit()
  await redis?.stop()
})

it('a pause of the client process longer than the deadline does not fail calls whose replies arrived', async () => {
  const limiter = createLimiter({
    rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1000, window: '1h' }) }],
    store: redisStore({ client, prefix: `pause-${Date.now()}` }),
  })
  await limiter.limit('warm')
  const calls = Array.from({ length: 20 }, (_, i) => limiter.limit(`k${i}`))
  // The commands go out; then a 250 ms pause (a long GC, a busy CPU): the replies arrive meanwhile, unread.
  // Far past the 45 ms deadline either way; 60 ms gave redis-server on a loaded machine too little
  // time to be scheduled and answer, so its late replies rightly timed out.
  await new Promise((resolve) => setImmediate(resolve))
  const end = performance.now() + 250
  while (performance.now() < end) {}
  const decisions = await Promise.all(calls)
  expect(decisions.map((d) => d.reason ?? 'ok')).toEqual(Array(20).fill('ok'))
  expect((await limiter.limit('after')).allowed).toBe(true)
})
