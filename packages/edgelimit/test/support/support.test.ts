import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { Redis as Upstash } from '@upstash/redis'
import { Cluster, Redis as IORedis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type RedisCluster, type RedisServer, startCluster, startDelayProxy, startRedis } from './redis.js'
import { upstashFixture } from './redis-client.js'

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Clients and servers created in a test, closed after it even when it fails. */
const cleanups: (() => Promise<unknown> | unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function client(target: { host: string; port: number }, options: { commandTimeout?: number } = {}): IORedis {
  const redis = new IORedis({ host: target.host, port: target.port, maxRetriesPerRequest: 1, ...options })
  cleanups.push(() => redis.disconnect())
  return redis
}

async function server(options?: Parameters<typeof startRedis>[0]): Promise<RedisServer> {
  const started = await startRedis(options)
  cleanups.push(() => started.stop())
  return started
}

describe('startRedis', () => {
  it('starts on a free loopback port, answers PING, and stop() leaves no process or temp dir behind', async () => {
    const redis = await startRedis()
    const { pid, dir } = redis
    try {
      expect(redis.host).toBe('127.0.0.1')
      expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`)
      expect(isAlive(pid)).toBe(true)
      expect(existsSync(dir)).toBe(true)
      const c = client(redis)
      expect(await c.ping()).toBe('PONG')
      // persistence is off
      expect(await c.config('GET', 'appendonly')).toEqual(['appendonly', 'no'])
      expect(await c.config('GET', 'save')).toEqual(['save', ''])
    } finally {
      await redis.stop()
    }
    expect(isAlive(pid)).toBe(false)
    expect(existsSync(dir)).toBe(false)
    await redis.stop() // idempotent
  })

  it('passes extra args through', async () => {
    const redis = await server({ args: ['--maxmemory', '12345678'] })
    expect(await client(redis).config('GET', 'maxmemory')).toEqual(['maxmemory', '12345678'])
  })

  it('fails fast with the log tail when redis-server rejects its config', async () => {
    await expect(startRedis({ args: ['--no-such-directive', 'x'] })).rejects.toThrow(
      /exited during start-up[\s\S]*no-such-directive/i,
    )
  })

  it('restart() keeps the port, gets a new PID and empties the data', async () => {
    const redis = await server()
    const { port, pid } = redis
    await client(redis).set('survivor', 'no')
    await redis.restart()
    expect(redis.port).toBe(port)
    expect(redis.pid).not.toBe(pid)
    expect(isAlive(pid)).toBe(false)
    expect(await client(redis).get('survivor')).toBeNull()
  })

  it('pause() makes commands time out and resume() brings the server back', async () => {
    const redis = await server()
    const c = client(redis, { commandTimeout: 250 })
    expect(await c.ping()).toBe('PONG')
    redis.pause()
    try {
      await expect(c.ping()).rejects.toThrow(/timed out/i)
    } finally {
      redis.resume()
    }
    expect(await c.ping()).toBe('PONG')
  })

  it('stop() works on a paused server', async () => {
    const redis = await startRedis()
    redis.pause()
    await redis.stop()
    expect(isAlive(redis.pid)).toBe(false)
  })
})

describe('startDelayProxy', () => {
  it('adds the delay in each direction to a round trip and keeps byte order', async () => {
    const delayMs = 60
    const redis = await server()
    const proxy = await startDelayProxy(redis, delayMs)
    cleanups.push(() => proxy.close())
    const direct = client(redis)
    const far = client({ host: '127.0.0.1', port: proxy.port })
    await Promise.all([direct.ping(), far.ping()]) // connect + handshake

    // The direct round trip is the fastest of 5: one slow moment of the loaded machine there made
    // `farMs - directMs` fall short of the delay. (Slowness in `farMs` only makes it larger.)
    let directMs = Number.POSITIVE_INFINITY
    for (let i = 0; i < 5; i++) {
      const started = performance.now()
      expect(await direct.ping()).toBe('PONG')
      directMs = Math.min(directMs, performance.now() - started)
    }
    const started = performance.now()
    expect(await far.ping()).toBe('PONG')
    const farMs = performance.now() - started
    expect(farMs).toBeGreaterThanOrEqual(2 * delayMs - 2)
    expect(farMs - directMs).toBeGreaterThanOrEqual(delayMs)

    // a value that spans many chunks arrives intact
    const big = createHash('sha256').update('x').digest('hex').repeat(40_000) // 2.5 MB
    await far.set('big', big)
    expect(await far.get('big')).toBe(big)
  })
})

describe('startCluster', () => {
  let cluster: RedisCluster
  beforeAll(async () => {
    cluster = await startCluster()
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  async function roundTrip(prefix: string): Promise<void> {
    // seed with every node: some may have been killed
    const c = new Cluster(cluster.nodes, { clusterRetryStrategy: (times) => (times > 20 ? null : 100) })
    c.on('error', () => {})
    try {
      for (let i = 0; i < 30; i++) await c.set(`${prefix}:${i}`, String(i))
      for (let i = 0; i < 30; i++) expect(await c.get(`${prefix}:${i}`)).toBe(String(i))
    } finally {
      c.disconnect()
    }
    // the keys really are spread over all three masters
    for (const master of await cluster.masters()) {
      expect(Number(await client(master).dbsize())).toBeGreaterThan(0)
    }
  }

  it('runs 3 masters and 3 replicas and serves keys across hash slots', async () => {
    expect(cluster.nodes).toHaveLength(6)
    const masters = await cluster.masters()
    expect(masters).toHaveLength(3)
    for (const master of masters) expect(isAlive(master.pid)).toBe(true)
    const roles = await Promise.all(
      cluster.nodes.map(async (node) => (await client(node).info('replication')).match(/role:(\w+)/)?.[1]),
    )
    expect(roles.filter((role) => role === 'master')).toHaveLength(3)
    expect(roles.filter((role) => role === 'slave')).toHaveLength(3)
    await roundTrip('before')
  })

  it('fails over after a master is killed and serves again', async () => {
    const [victim] = await cluster.masters()
    if (!victim) throw new Error('no master')
    await cluster.killNode(victim.port)
    expect(isAlive(victim.pid)).toBe(false)
    await cluster.waitForFailover()
    const masters = await cluster.masters()
    expect(masters).toHaveLength(3)
    expect(masters.map((m) => m.port)).not.toContain(victim.port)
    await roundTrip('after')
  })
})

describe('startUpstashBridge', () => {
  const fixture = upstashFixture()

  const upstash = (options: { enableAutoPipelining?: boolean; responseEncoding?: false } = {}): Upstash =>
    new Upstash({ url: fixture.bridge.url, token: fixture.bridge.token, enableTelemetry: false, ...options })

  it('does set/get/incr with the default client (base64 responses, auto-pipelining)', async () => {
    const u = upstash()
    expect(await u.set('greeting', 'héllo ✓ 🚀')).toBe('OK')
    expect(await u.get('greeting')).toBe('héllo ✓ 🚀')
    expect(await u.get('missing')).toBeNull()
    expect(await u.incr('counter')).toBe(1)
    expect(await u.incrby('counter', 41)).toBe(42)
    expect(await u.get('counter')).toBe(42) // @upstash/redis JSON-parses values
    await u.hset('hash', { a: 'x', b: 'OK' })
    expect(await u.hgetall('hash')).toEqual({ a: 'x', b: 'OK' })
    expect(await client(fixture.redis).get('greeting')).toBe('héllo ✓ 🚀')
  })

  it('works without base64 encoding and without auto-pipelining (POST /)', async () => {
    const u = upstash({ enableAutoPipelining: false, responseEncoding: false })
    expect(await u.set('plain', 'abcd')).toBe('OK') // "abcd" is valid base64: must not be decoded
    expect(await u.get('plain')).toBe('abcd')
    expect(await u.mget('plain', 'nope')).toEqual(['abcd', null])
  })

  it('runs eval and evalsha', async () => {
    for (const u of [upstash(), upstash({ enableAutoPipelining: false })]) {
      const script = 'return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1, false}'
      expect(await u.eval(script, ['k'], ['v', 41])).toEqual(['k', 'v', 42, null])
      const sha = await u.scriptLoad(script)
      expect(sha).toBe(createHash('sha1').update(script).digest('hex'))
      expect(await u.evalsha(sha, ['k2'], ['w', 1])).toEqual(['k2', 'w', 2, null])
      const s = u.createScript<number>('return redis.call("INCRBY", KEYS[1], ARGV[1])')
      expect(await s.exec(['script-counter'], ['5'])).toBeGreaterThanOrEqual(5)
    }
  })

  it('surfaces NOSCRIPT as an error (single command and pipeline)', async () => {
    const sha = '0'.repeat(40)
    await expect(upstash().evalsha(sha, [], [])).rejects.toThrow(/NOSCRIPT/)
    await expect(upstash({ enableAutoPipelining: false }).evalsha(sha, [], [])).rejects.toThrow(/NOSCRIPT/)
    const results = await upstash().pipeline().evalsha(sha, [], []).exec({ keepErrors: true })
    expect(results[0]?.error).toMatch(/^NOSCRIPT/)
  })

  it('runs pipelines and transactions', async () => {
    const u = upstash()
    const results = await u.pipeline().set('p', 1).incr('p').get('p').del('p').get('p').exec()
    expect(results).toEqual(['OK', 2, 2, 1, null])
    const tx = await u.multi().set('t', 'a').append('t', 'b').get('t').exec()
    expect(tx).toEqual(['OK', 2, 'ab'])
    await expect(u.pipeline().set('x', 1).incr('greeting').exec()).rejects.toThrow(/not an integer/)
  })

  it('rejects a wrong token', async () => {
    const u = new Upstash({ url: fixture.bridge.url, token: 'wrong', enableTelemetry: false })
    await expect(u.get('greeting')).rejects.toThrow(/Unauthorized/)
  })
})
