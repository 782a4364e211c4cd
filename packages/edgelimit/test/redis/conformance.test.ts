import { Redis as Upstash } from '@upstash/redis'
import { Cluster, Redis } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter, fixedWindow, tokenBucket } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { keySlot } from '../../src/stores/redis/slot.js'
import { storeConformance } from '../../src/testing/index.js'
import {
  type RedisCluster,
  type RedisServer,
  redisCommand,
  startCluster,
  startRedis,
} from '../support/redis.js'
import { stateKey } from '../support/state-key.js'
import { startUpstashBridge } from '../support/upstash-bridge.js'
import { farWindow } from '../support/window.js'

// The same suite the memory store passes, against real servers started for this file.
let redis: RedisServer
let cluster: RedisCluster
const closers: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  ;[redis, cluster] = await Promise.all([startRedis(), startCluster()])
}, 120_000)

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  await Promise.all([redis?.stop(), cluster?.stop()])
})

function suite(name: string, connect: () => Promise<unknown>) {
  describe(name, () => {
    let client: unknown
    beforeAll(async () => {
      client = await connect()
    })
    for (const c of storeConformance({ store: () => redisStore({ client, clock: 'client' }) }))
      it(c.name, c.run)
  })
}

suite('standalone via ioredis', async () => {
  const client = new Redis({ port: redis.port, host: redis.host })
  closers.push(() => client.quit())
  return client
})

suite('standalone via node-redis', async () => {
  const client = createClient({ url: redis.url })
  await client.connect()
  closers.push(() => client.close())
  return client
})

suite('6-node cluster via ioredis Cluster', async () => {
  const client = new Cluster(cluster.nodes)
  closers.push(() => client.quit())
  return client
})

suite('6-node cluster via node-redis createCluster', async () => {
  const client = createCluster({
    rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
  })
  await client.connect()
  closers.push(() => client.close())
  return client
})

suite('Upstash REST (@upstash/redis through the test bridge)', async () => {
  const bridge = await startUpstashBridge({ host: redis.host, port: redis.port })
  closers.push(() => bridge.close())
  return new Upstash({ url: bridge.url, token: bridge.token })
})

describe('coalescing on the 6-node cluster', () => {
  // On Redis TIME: a window these tests cannot cross the end of (a crossing would admit again).
  const WINDOW = farWindow()
  it('computes the slot of a hash tag as CLUSTER KEYSLOT does', async () => {
    const port = cluster.nodes[0]?.port as number
    for (const tag of ['a', 'user:42', 'k9999', '10.0.0.1', 'héllo wörld', '日本', '%7D', 'x'.repeat(300)]) {
      expect(keySlot(tag)).toBe(await redisCommand(port, ['CLUSTER', 'KEYSLOT', `edgelimit:r:{${tag}}`]))
    }
  })

  it("the empty key '' has a tag of its own: decided and reset on one slot, and its batch-mates with it", async () => {
    const client = new Cluster(cluster.nodes)
    closers.push(() => client.quit())
    const limiter = createLimiter({
      rules: [
        { name: 'a', algorithm: fixedWindow({ limit: 1, window: WINDOW }) },
        { name: 'b', algorithm: tokenBucket({ capacity: 6, refillRate: 1, refillInterval: '1h' }) },
      ],
      store: redisStore({ client, prefix: 'ek' }),
      timeout: false,
      breaker: false,
      denyCache: false,
    })
    // Keys on the slot '' is batched on now (its tag `%`), and on the one an empty tag hashed to.
    const mates = (slot: number) => {
      const found: string[] = []
      for (let i = 0; found.length < 3; i++) if (keySlot(`user${i}`) === slot) found.push(`user${i}`)
      return found
    }
    const others = [
      ...mates(keySlot('%')),
      ...mates(keySlot(stateKey('ek', 'a', fixedWindow({ limit: 1, window: WINDOW }), ''))),
    ]
    expect(others.length).toBe(6)
    await limiter.limit('warm')
    // `warm` is in flight, so the rest of the tick coalesces per slot, '' among its batch-mates.
    const ds = await Promise.all([
      limiter.limit('warm'),
      limiter.limit(''),
      ...others.map((k) => limiter.limit(k)),
    ])
    // The second `warm` meets its own first call's window (limit 1); everything else is admitted.
    expect(ds.map((d) => d.reason ?? 'admitted')).toEqual([
      'limit-exceeded',
      ...others.map(() => 'admitted'),
      'admitted',
    ])
    const ek = [
      stateKey('ek', 'a', fixedWindow({ limit: 1, window: WINDOW }), '%'),
      stateKey('ek', 'b', tokenBucket({ capacity: 6, refillRate: 1, refillInterval: '1h' }), '%'),
    ]
    expect(await client.exists(ek)).toBe(2)
    // '' and '%' are two keys.
    expect((await limiter.limit('%')).allowed).toBe(true)
    expect((await limiter.limit('')).allowed).toBe(false)
    await limiter.reset('')
    expect(await client.exists(ek)).toBe(0)
    expect((await limiter.limit('')).allowed).toBe(true)
    expect((await limiter.limit('%')).allowed).toBe(false)
  })

  it('batches per slot: 300 decisions over 40 keys in one tick, one EVALSHA per slot (and the lone first)', async () => {
    const client = new Cluster(cluster.nodes)
    closers.push(() => client.quit())
    // Every EVALSHA the store sends, with its keys (recorded before the store wraps the client).
    const sent: string[][] = []
    const evalsha = client.evalsha.bind(client) as (...args: unknown[]) => Promise<unknown>
    Object.assign(client, {
      evalsha: (...args: unknown[]) => {
        sent.push(args[2] as string[])
        return evalsha(...args)
      },
    })
    const limiter = createLimiter({
      rules: [
        { name: 'a', algorithm: fixedWindow({ limit: 5, window: WINDOW }) },
        { name: 'b', algorithm: tokenBucket({ capacity: 6, refillRate: 1, refillInterval: '1h' }) },
      ],
      store: redisStore({ client, prefix: 'cs' }),
      timeout: false,
      breaker: false,
      denyCache: false,
    })
    // No node has the script: every batch meets NOSCRIPT at once, on three masters, and each node
    // must get the script loaded (a regression: one reload used to be shared by all nodes).
    for (const node of cluster.nodes) await redisCommand(node.port, ['SCRIPT', 'FLUSH'])
    const warm = await Promise.all(Array.from({ length: 40 }, (_, i) => limiter.peek(`warm${i}`)))
    expect(warm.filter((d) => !d.allowed).map((d) => d.reason)).toEqual([])
    sent.length = 0
    const keys = Array.from({ length: 300 }, (_, i) => `user:${i % 40}`)
    const ds = await Promise.all(keys.map((k) => limiter.limit(k)))
    // 7 or 8 calls per key: the first 5 admitted (fixed window 5 binds), the rest denied.
    for (let k = 0; k < 40; k++) {
      const mine = ds.filter((_, i) => i % 40 === k)
      expect(mine.map((d) => d.allowed)).toEqual(mine.map((_, j) => j < 5))
    }
    // One command per slot, each holding only keys of its slot (Redis would refuse CROSSSLOT),
    // plus the first decision's own: nothing was in flight, so it left without waiting.
    const slotOf = (key: string) => keySlot(key.slice(key.indexOf('{') + 1, key.lastIndexOf('}')))
    expect(sent.length).toBe(1 + new Set(keys.map((k) => keySlot(k))).size)
    expect(sent[0]).toEqual([
      stateKey('cs', 'a', fixedWindow({ limit: 5, window: WINDOW }), 'user:0'),
      stateKey('cs', 'b', tokenBucket({ capacity: 6, refillRate: 1, refillInterval: '1h' }), 'user:0'),
    ])
    for (const batch of sent) expect(new Set(batch.map(slotOf)).size).toBe(1)
    expect(sent.reduce((n, b) => n + b.length, 0)).toBe(300 * 2)
  })
})
