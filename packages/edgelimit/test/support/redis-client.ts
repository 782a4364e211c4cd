import { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { type RedisServer, startRedis } from './redis.js'
import { startUpstashBridge, type UpstashBridge, type UpstashBridgeOptions } from './upstash-bridge.js'

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

/** A redis-server of the test file's own and an Upstash REST bridge in front of it. */
export interface UpstashFixture {
  redis: RedisServer
  bridge: UpstashBridge
}

/**
 * Starts a redis-server and an Upstash REST bridge on it before the tests of the enclosing scope
 * (beforeAll; call it at the top level or inside a `describe`), and closes both after them.
 */
export function upstashFixture(options?: UpstashBridgeOptions): UpstashFixture {
  const fixture = {} as Partial<UpstashFixture>
  beforeAll(async () => {
    fixture.redis = await startRedis()
    fixture.bridge = await startUpstashBridge(fixture.redis, options)
  })
  afterAll(async () => {
    await fixture.bridge?.close()
    await fixture.redis?.stop()
  })
  return fixture as UpstashFixture
}
