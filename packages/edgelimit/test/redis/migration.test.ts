/**
 * A Cluster slot being resharded (MIGRATING on its owner, IMPORTING on the node it moves to). Redis
 * then refuses, with TRYAGAIN, a multi-key command whose keys are not all on the node: a batch of
 * fresh client keys, or the rules' keys of a fresh client key on a multi-rule limiter.
 */
import { Cluster } from 'ioredis'
import { createCluster } from 'redis'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createLimiter, fixedWindow, type LimiterOptions, slidingWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { keySlot } from '../../src/stores/redis/slot.js'
import { manualClock } from '../../src/testing/index.js'
import { type RedisCluster, redisCommand, startCluster } from '../support/redis.js'
import { stateKey } from '../support/state-key.js'
import { farWindow } from '../support/window.js'

let cluster: RedisCluster
const closers: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  cluster = await startCluster()
}, 120_000)

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  await cluster?.stop()
})

/** `count` client keys of one slot, the slot, its owner and another master. */
async function migratingSlot(seed: string, count: number) {
  const slot = keySlot(`${seed}0`)
  const keys = [`${seed}0`]
  for (let i = 1; keys.length < count; i++) if (keySlot(`${seed}x${i}`) === slot) keys.push(`${seed}x${i}`)
  const first = cluster.nodes[0]?.port as number
  const slots = (await redisCommand(first, ['CLUSTER', 'SLOTS'])) as [
    number,
    number,
    [string, number, string],
  ][]
  const owner = slots.find(([from, to]) => slot >= from && slot <= to)?.[2] as [string, number, string]
  const [, source, sourceId] = owner
  const masters = await cluster.masters()
  const target = masters.find((m) => m.port !== source)?.port as number
  const targetId = String(await redisCommand(target, ['CLUSTER', 'MYID']))
  return { slot, keys, source, sourceId, target, targetId }
}

type Migration = Awaited<ReturnType<typeof migratingSlot>>

async function startMigration(m: Migration) {
  await redisCommand(m.target, ['CLUSTER', 'SETSLOT', String(m.slot), 'IMPORTING', m.sourceId])
  await redisCommand(m.source, ['CLUSTER', 'SETSLOT', String(m.slot), 'MIGRATING', m.targetId])
}

/** The slot's keys were all written on the target: it now owns the slot (every master is told). */
async function endMigration(m: Migration) {
  for (const master of await cluster.masters())
    await redisCommand(master.port, ['CLUSTER', 'SETSLOT', String(m.slot), 'NODE', m.targetId])
}

const clients = {
  'node-redis': async () => {
    const client = createCluster({
      rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
      defaults: { disableOfflineQueue: true },
    })
    await client.connect()
    closers.push(() => client.close())
    return client
  },
  ioredis: async () => {
    const client = new Cluster(cluster.nodes, { enableOfflineQueue: false, retryDelayOnTryAgain: 0 })
    await new Promise((resolve) => client.once('ready', resolve))
    closers.push(() => client.quit())
    return client
  },
}

/** TRYAGAIN replies the masters have sent (INFO errorstats). */
async function tryAgains(): Promise<number> {
  let sum = 0
  for (const master of await cluster.masters()) {
    const info = String(await redisCommand(master.port, ['INFO', 'errorstats']))
    sum += Number(/errorstat_TRYAGAIN:count=(\d+)/.exec(info)?.[1] ?? 0)
  }
  return sum
}

// Both rules count on Redis TIME (the manual clock below times the store's retries only): windows
// this file's run cannot cross the end of, or the counts asserted would start again.
const FIXED = fixedWindow({ limit: 10, window: farWindow() })
const SLIDING = slidingWindow({ limit: 10, window: farWindow() })

let run = 0
for (const [name, connect] of Object.entries(clients)) {
  describe(`a slot being migrated, via ${name}`, () => {
    let client: unknown
    let m: Migration
    let prefix: string
    let errors: string[]
    beforeAll(async () => {
      client = await connect()
    })
    beforeEach(async () => {
      prefix = `mig${run}`
      m = await migratingSlot(`${name}-${run++}-`, 6)
      errors = []
      await startMigration(m)
    })

    const limiter = (rules: number, options: Pick<LimiterOptions, 'timeout' | 'clock'> = {}) =>
      createLimiter({
        store: redisStore({ client, prefix }),
        rules: [
          { name: 'w', algorithm: FIXED },
          { name: 's', algorithm: SLIDING },
        ].slice(0, rules),
        breaker: false,
        denyCache: false,
        ...options,
        onEvent: (e) => {
          if (e.type === 'store-error') errors.push(String(e.error))
        },
      })

    it('a single-rule batch of fresh client keys is split and each decision decided once', async () => {
      // ioredis gives up on the batch only after its own retries: a deadline long enough for them.
      const one = limiter(1, { timeout: '5s' })
      const [a, b, c] = m.keys as [string, string, string]
      const ds = await Promise.all([a, b, c, a, b, a].map((k) => one.limit(k)))
      expect(errors).toEqual([])
      expect(ds.map((d) => d.remaining)).toEqual([9, 9, 9, 8, 8, 7])
      // Each fresh key was written on the node the slot moves to, each decision counted once.
      await endMigration(m)
      const count = async (k: string) =>
        String(await redisCommand(m.target, ['GET', stateKey(prefix, 'w', FIXED, k)]))
      expect((await Promise.all([a, b, c].map(count))).map((s) => s.split(':')[1])).toEqual(['3', '2', '1'])
    })

    it("then, for a second, the slot's decisions go one per command: no batch for Redis to refuse", async () => {
      const clock = manualClock(1_700_000_000_000)
      const one = limiter(1, { timeout: '5s', clock })
      const [a, b, c] = m.keys as [string, string, string]
      const batch = () => Promise.all([a, b, c, a].map((k) => one.limit(k)))
      const before = await tryAgains()
      expect((await batch()).map((d) => d.remaining)).toEqual([9, 9, 9, 8])
      const refused = await tryAgains()
      expect(refused).toBeGreaterThan(before)
      clock.advance(999)
      expect((await batch()).map((d) => d.remaining)).toEqual([7, 8, 8, 6])
      expect(await tryAgains()).toBe(refused)
      // A second later batches are tried again, and split again while the slot still moves (Redis
      // serves a batch whose keys are all on the target: these are fresh).
      clock.advance(1)
      const [, , , d, e, f] = m.keys as string[]
      expect(
        (await Promise.all([d, e, f, a].map((k) => one.limit(k as string)))).map((d) => d.remaining),
      ).toEqual([9, 9, 9, 5])
      expect(await tryAgains()).toBeGreaterThan(refused)
      expect(errors).toEqual([])
    })

    it('a multi-rule decision on a fresh client key is refused for the migration (documented); a known one is decided', async () => {
      const two = limiter(2)
      const [known, fresh] = m.keys as [string, string]
      await endMigration(m)
      expect((await two.limit(known)).allowed).toBe(true)
      // The slot moves back: the known key's state is all on the source, the fresh key's nowhere.
      m = { ...m, source: m.target, sourceId: m.targetId, target: m.source, targetId: m.sourceId }
      await startMigration(m)
      expect((await two.limit(known)).remaining).toBe(8)
      const refused = await two.limit(fresh)
      expect(refused.allowed).toBe(false)
      expect(refused.rules.map((r) => r.reason)).toEqual(['store-unavailable', 'store-unavailable'])
      expect(errors).toHaveLength(1)
    })
  })
}
