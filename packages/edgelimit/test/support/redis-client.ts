import { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { type RedisServer, startRedis } from './redis.js'

/** A redis-server of the test file's own and one ioredis client on it (set before the tests run). */
export interface RedisFixture {
  redis: RedisServer
  client: Redis
}

/**
 * Starts a redis-server and connects an ioredis client before the file's tests (beforeAll), and
 * closes both after them (afterAll). Call it at the top level of a test file.
 */
export function redisFixture(): RedisFixture {
  const fixture = {} as Partial<RedisFixture>
  beforeAll(async () => {
    const redis = await startRedis()
    fixture.redis = redis
    fixture.client = new Redis({ port: redis.port, host: redis.host })
  })
  afterAll(async () => {
    await fixture.client?.quit()
    await fixture.redis?.stop()
  })
  return fixture as RedisFixture
}
