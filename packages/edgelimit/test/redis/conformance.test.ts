import { Redis as Upstash } from '@upstash/redis'
import { Cluster, Redis } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { redisStore } from '../../src/redis.js'
import { storeConformance } from '../../src/testing/index.js'
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../support/redis.js'
import { startUpstashBridge } from '../support/upstash-bridge.js'

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
