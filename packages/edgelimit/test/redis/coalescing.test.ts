import fc from 'fast-check'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { describe, expect, it } from 'vitest'
import type { AlgorithmSpec } from '../../src/algorithms.js'
import {
  createLimiter,
  fixedWindow,
  gcra,
  leakyBucket,
  memoryStore,
  type RuleVerdict,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { startRedis } from '../support/redis.js'
import { redisFixture } from '../support/redis-client.js'
import { stateKey } from '../support/state-key.js'
import { farWindow } from '../support/window.js'

// Coalescing: decisions issued in the same tick travel as one EVALSHA. These tests check that a
// batch decides exactly what the same calls decide one at a time, against a real redis-server.

const fixture = redisFixture()

async function commandCalls(c: Redis, name: string): Promise<number> {
  const line = (await c.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${name}:`))
  return Number(/calls=(\d+)/.exec(line ?? '')?.[1] ?? 0)
}

const fields = (v: RuleVerdict) => [
  v.allowed,
  v.remaining,
  v.resetAfterMs,
  v.retryAfterMs,
  v.delayMs,
  v.reason,
]

const small = fc.integer({ min: 1, max: 8 })
const ms = fc.integer({ min: 1, max: 3000 })
const algorithm: fc.Arbitrary<AlgorithmSpec> = fc.oneof(
  fc.record({ limit: small, window: ms }).map(fixedWindow),
  fc.record({ limit: small, window: ms }).map(slidingLog),
  fc.record({ limit: small, window: ms }).map(slidingWindow),
  fc.record({ capacity: small, refillRate: small, refillInterval: ms }).map(tokenBucket),
  fc.record({ capacity: small, leakRate: small, leakInterval: ms }).map(leakyBucket),
  fc
    .record({ capacity: fc.integer({ min: 0, max: 6 }), leakRate: small, leakInterval: ms })
    .map((o) => leakyBucket({ ...o, mode: 'shape' })),
  fc.record({ limit: small, period: ms, burst: small }).map(gcra),
)
/** One call: which of 3 keys, ms since the previous call, cost, shadow bitmask, force. */
const call = fc.record({
  key: fc.integer({ min: 0, max: 2 }),
  dt: fc.integer({ min: 0, max: 400 }),
  cost: fc.integer({ min: 0, max: 9 }),
  shadow: fc.integer({ min: 0, max: 7 }),
  force: fc.boolean().map((b) => b && Math.random() < 0.3),
})

let run = 0
describe('a coalesced batch ≡ the same calls one at a time', () => {
  it('every algorithm, 1–3 rules, shadow and forced charges, repeated keys (vs the core)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(algorithm, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 2e12 }),
        fc.array(call, { minLength: 1, maxLength: 60 }),
        async (specs, t0, calls) => {
          const rules = createLimiter({
            rules: specs.map((algorithm, i) => ({ name: `r${i}`, algorithm })),
          }).rules
          const prefix = `co${run++}`
          const reference = memoryStore().bind(rules)
          const batched = redisStore({ client: fixture.client, clock: 'client', prefix, maxBatch: 64 }).bind(
            rules,
          )
          // Every call issued in this tick: one EVALSHA (60 < maxBatch 64), decided in order.
          let t = t0
          const times = calls.map((c) => {
            t += c.dt
            return t
          })
          const pending = calls.map((c, i) =>
            batched.evaluate(`k${c.key}`, c.cost, times[i] as number, {
              shadow: c.shadow & ((1 << rules.length) - 1),
              force: c.force,
            }),
          )
          const got = await Promise.all(pending)
          for (const [i, c] of calls.entries()) {
            const want = await reference.evaluate(`k${c.key}`, c.cost, times[i] as number, {
              shadow: c.shadow & ((1 << rules.length) - 1),
              force: c.force,
            })
            const g = JSON.stringify((got[i] as readonly RuleVerdict[]).map(fields))
            const w = JSON.stringify(want.map(fields))
            if (g !== w) throw new Error(`call ${i} ${JSON.stringify(c)}: Redis batch ${g} ≠ core ${w}`)
          }
        },
      ),
      { numRuns: 80 },
    )
  })
})

describe('large limiters', () => {
  it('30 rules (the most a limiter takes) compile to a script Redis runs, ≡ the core', async () => {
    const makers = [
      (i: number) => fixedWindow({ limit: 3 + (i % 5), window: '1h' }),
      (i: number) => slidingLog({ limit: 3 + (i % 4), window: '1h' }),
      (i: number) => slidingWindow({ limit: 4 + (i % 3), window: '1h' }),
      (i: number) => tokenBucket({ capacity: 3 + (i % 6), refillRate: 1, refillInterval: '1h' }),
      (i: number) => leakyBucket({ capacity: 3 + (i % 2), leakRate: 1, leakInterval: '1h', mode: 'shape' }),
      (i: number) => gcra({ limit: 1, period: '1h', burst: 3 + (i % 7) }),
    ]
    const rules = createLimiter({
      rules: Array.from({ length: 30 }, (_, i) => ({
        name: `r${i}`,
        algorithm: (makers[i % 6] as (i: number) => AlgorithmSpec)(i),
      })),
    }).rules
    const reference = memoryStore().bind(rules)
    const batched = redisStore({ client: fixture.client, clock: 'client', prefix: 'big' }).bind(rules)
    const now = 1_700_000_000_000
    const calls = Array.from({ length: 12 }, (_, i) => ({
      key: `k${i % 2}`,
      cost: 1 + (i % 2),
      shadow: i === 5 ? 0b101 : 0,
    }))
    const got = await Promise.all(
      calls.map((c, i) => batched.evaluate(c.key, c.cost, now + i, { shadow: c.shadow })),
    )
    for (const [i, c] of calls.entries()) {
      const want = await reference.evaluate(c.key, c.cost, now + i, { shadow: c.shadow })
      expect((got[i] as readonly RuleVerdict[]).map(fields)).toEqual(want.map(fields))
    }
  })
})

describe('round trips', () => {
  const rules = [
    { name: 'burst', algorithm: tokenBucket({ capacity: 50, refillRate: 1, refillInterval: '1h' }) },
    { name: 'window', algorithm: fixedWindow({ limit: 400, window: '1h' }) },
  ]
  const PURE = { timeout: false, breaker: false, denyCache: false } as const

  it('200 decisions issued in one tick: the first leaves alone, the rest share ⌈199 / maxBatch⌉ EVALSHAs', async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    const store = redisStore({ client: c, prefix: 'rt1', maxBatch: 64 })
    const limiter = createLimiter({ rules, store, ...PURE })
    await limiter.limit('warm')
    await c.config('RESETSTAT')
    const ds = await Promise.all(Array.from({ length: 200 }, (_, i) => limiter.limit(`k${i % 7}`)))
    // Nothing was in flight, so the first did not wait for the tick's end; the other 199 did.
    expect(await commandCalls(c, 'evalsha')).toBe(1 + Math.ceil(199 / 64))
    // 7 keys: 29 or 28 calls each, all below the 50-token burst.
    expect(ds.every((d) => d.allowed)).toBe(true)
    await c.quit()
  })

  it('an ioredis client with enableAutoPipelining: full batches of 8 leave in the same tick, ≡ a plain client', async () => {
    const port = fixture.redis.port
    const host = fixture.redis.host
    // keyPrefix too: the store's EVALSHA is ioredis's own command, which applies it.
    const auto = new Redis({ port, host, enableAutoPipelining: true, keyPrefix: 'kp:' })
    const plain = new Redis({ port, host })
    const make = (client: Redis, prefix: string) =>
      createLimiter({ rules, store: redisStore({ client, prefix }), ...PURE })
    const [a, b] = [make(auto, 'rt-auto'), make(plain, 'rt-plain')]
    await Promise.all([a.limit('warm'), b.limit('warm')])
    await plain.config('RESETSTAT')
    // ioredis's auto-pipelining would hold these until a setImmediate: the store writes the lone
    // first decision and then each full batch at once (the socket's byte count grows with each).
    const sent = [auto.stream.bytesWritten]
    const decisions = [a.limit('k0')]
    sent.push(auto.stream.bytesWritten)
    for (let i = 1; i < 20; i++) decisions.push(a.limit(`k${i % 3}`))
    sent.push(auto.stream.bytesWritten)
    expect(sent[1]).toBeGreaterThan(sent[0] as number)
    expect(sent[2]).toBeGreaterThan(sent[1] as number)
    const viaAuto = await Promise.all(decisions)
    expect(await commandCalls(plain, 'evalsha')).toBe(4) // 1 (nothing in flight) + 8 + 8 + 3
    const viaPlain = await Promise.all(Array.from({ length: 20 }, (_, i) => b.limit(`k${i % 3}`)))
    const strip = (d: { allowed: boolean; remaining: number }) => [d.allowed, d.remaining]
    expect(viaAuto.map(strip)).toEqual(viaPlain.map(strip))
    const burst = stateKey(
      'rt-auto',
      'burst',
      tokenBucket({ capacity: 50, refillRate: 1, refillInterval: '1h' }),
      'k0',
    )
    expect(await plain.exists(`kp:${burst}`, burst)).toBe(1)
    expect(await plain.exists(`kp:${burst}`)).toBe(1)
    await Promise.all([auto.quit(), plain.quit()])
  })

  it("node-redis (it sends a tick's commands together): the first decision from idle waits for the tick too", async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    const nodeRedis = createClient({ url: fixture.redis.url })
    await nodeRedis.connect()
    const limiter = createLimiter({
      rules,
      store: redisStore({ client: nodeRedis, prefix: 'rt-nr' }),
      ...PURE,
    })
    await limiter.limit('warm')
    await c.config('RESETSTAT')
    // maxBatch 64 (node-redis's default) and no lone first command: ⌈20 / 64⌉ = 1.
    await Promise.all(Array.from({ length: 20 }, (_, i) => limiter.limit(`k${i % 3}`)))
    expect(await commandCalls(c, 'evalsha')).toBe(1)
    await Promise.all([c.quit(), nodeRedis.quit()])
  })

  it('coalesce: false sends one EVALSHA per decision', async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    const store = redisStore({ client: c, prefix: 'rt2', coalesce: false })
    const limiter = createLimiter({ rules, store, ...PURE })
    await limiter.limit('warm')
    await c.config('RESETSTAT')
    await Promise.all(Array.from({ length: 200 }, (_, i) => limiter.limit(`k${i % 7}`)))
    expect(await commandCalls(c, 'evalsha')).toBe(200)
    await c.quit()
  })

  it('a reset issued after decisions in the same tick runs after them', async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    // On Redis TIME, a window the test cannot cross the end of: the batch after the first call
    // would count afresh.
    const spec = fixedWindow({ limit: 3, window: farWindow() })
    const limiter = createLimiter({
      rules: [{ name: 'w', algorithm: spec }],
      store: redisStore({ client: c, prefix: 'rt3' }),
      ...PURE,
    })
    const first = Array.from({ length: 5 }, () => limiter.limit('k'))
    const reset = limiter.reset('k')
    const firstDs = await Promise.all(first)
    await reset
    expect(firstDs.map((d) => d.allowed)).toEqual([true, true, true, false, false])
    expect(await c.exists(stateKey('rt3', 'w', spec, 'k'))).toBe(0)
    expect((await limiter.limit('k')).remaining).toBe(2)
    await c.quit()
  })

  describe('decisions issued after a reset, without waiting for it, run after it', () => {
    const spec = fixedWindow({ limit: 3, window: farWindow() })
    const clients: [string, () => Promise<{ quit(): Promise<unknown> }>][] = [
      ['ioredis', async () => new Redis({ port: fixture.redis.port, host: fixture.redis.host })],
      // The store's EVALSHA skips the auto-pipelining queue: its DEL must too, or it leaves last.
      [
        'ioredis with enableAutoPipelining and a keyPrefix',
        async () =>
          new Redis({
            port: fixture.redis.port,
            host: fixture.redis.host,
            enableAutoPipelining: true,
            keyPrefix: 'kp:',
          }),
      ],
      ['node-redis', async () => createClient({ url: fixture.redis.url }).connect()],
    ]
    let made = 0
    for (const [name, connect] of clients) {
      it(`${name}: with nothing in flight, with decisions in flight, and after SCRIPT FLUSH`, async () => {
        const client = await connect()
        const admin = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
        const prefix = `order${made++}`
        const limiter = createLimiter({
          rules: [{ name: 'w', algorithm: spec }],
          store: redisStore({ client, prefix }),
          ...PURE,
        })
        const remaining = async (key: string) => (await limiter.peek(key)).remaining
        // Nothing in flight: the reset's DEL and then the decision.
        await limiter.limit('idle', { cost: 3 })
        const idle = [limiter.reset('idle'), limiter.limit('idle')] as const
        expect((await idle[1]).remaining).toBe(2)
        await idle[0]
        expect(await remaining('idle')).toBe(2)
        // Decisions in flight when the reset comes: it waits for them; the decision after it waits too.
        const calls = [limiter.limit('busy'), limiter.limit('busy'), limiter.reset('busy')]
        const after = limiter.limit('busy', { cost: 2 })
        await Promise.all(calls)
        expect((await after).remaining).toBe(1)
        expect(await remaining('busy')).toBe(1)
        // The script gone: the decision before the reset is reloaded (NOSCRIPT, then EVAL) before
        // the DEL, and the one after it is decided after the DEL.
        await admin.script('FLUSH')
        const reloaded = [limiter.limit('flushed', { cost: 3 }), limiter.reset('flushed')]
        const later = limiter.limit('flushed')
        await Promise.all(reloaded)
        expect((await later).remaining).toBe(2)
        expect(await remaining('flushed')).toBe(2)
        await Promise.all([client.quit(), admin.quit()])
      })
    }
  })
})

describe('failures stay per decision', () => {
  it('a key Redis cannot read fails its own decision only; the rest of the batch is decided', async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    const bad = stateKey('pd', 'w', slidingLog({ limit: 10, window: '1h' }), 'bad')
    await c.lpush(bad, 'not a counter')
    const limiter = createLimiter({
      rules: [{ name: 'w', algorithm: slidingLog({ limit: 10, window: '1h' }) }],
      store: redisStore({ client: c, prefix: 'pd' }),
      timeout: false,
      breaker: false,
      denyCache: false,
    })
    const bound = redisStore({ client: c, prefix: 'pd' }).bind(limiter.rules)
    const now = Date.now()
    const results = await Promise.allSettled([
      bound.evaluate('good', 1, now),
      bound.evaluate('bad', 1, now),
      bound.evaluate('good', 1, now),
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    const failed = results[1] as PromiseRejectedResult
    expect(failed.reason).toMatchObject({ code: 'ERR_EDGELIMIT_STORE' })
    expect(String(failed.reason.message)).toMatch(/WRONGTYPE/)
    // Both good decisions were charged once each: 10 - 2 left.
    expect((await limiter.peek('good')).remaining).toBe(8)
    expect(await c.type(bad)).toBe('list')
    await c.quit()
  })

  // A state that does not parse (written by hand or by another program: a rule changed by a deploy
  // has a key of its own, docs/decisions/0014-state-identity.md) decides as a fresh key, and the
  // batch it travels in is decided as usual. `k` is the current hour's window
  // index, which a window's state must hold for its count to be read at all.
  const now = 1_700_000_000_000
  const k = Math.floor(now / 3_600_000)
  it.each([
    {
      name: 'fixed window',
      algorithm: fixedWindow({ limit: 3, window: '1h' }),
      bad: ['1:2:3', `${k}:1:0`, `${k}:x`],
    },
    {
      name: 'sliding window',
      algorithm: slidingWindow({ limit: 3, window: '1h' }),
      bad: ['1:2', '5', `${k}:1`, `${k}:x:0`],
    },
    {
      name: 'token bucket',
      algorithm: tokenBucket({ capacity: 3, refillRate: 1, refillInterval: '1h' }),
      bad: ['1:2:3', `${k}:x`],
    },
    { name: 'gcra', algorithm: gcra({ limit: 1, period: '1h', burst: 3 }), bad: ['1:2:3', `${now}:x`] },
  ])(
    'a $name state that does not parse decides as a fresh key; its batch-mates are decided',
    async ({ name, algorithm, bad }) => {
      const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
      const prefix = `unparsed-${name.replace(' ', '-')}`
      const values = [...bad, 'garbage', '', 'inf:nan', '0x10:1e3', ':', '1:']
      await Promise.all(values.map((v, i) => c.set(stateKey(prefix, 'r', algorithm, `bad${i}`), v)))
      const rules = createLimiter({ rules: [{ name: 'r', algorithm }] }).rules
      const bound = redisStore({ client: c, clock: 'client', prefix }).bind(rules)
      const reference = memoryStore().bind(rules)
      const keys = values.flatMap((_, i) => ['good', `bad${i}`])
      const results = await Promise.allSettled(keys.map((k) => bound.evaluate(k, 1, now)))
      expect(results.filter((r) => r.status === 'rejected')).toEqual([])
      for (const [i, k] of keys.entries()) {
        const want = await reference.evaluate(k, 1, now)
        const got = (results[i] as PromiseFulfilledResult<readonly RuleVerdict[]>).value
        expect([k, got.map(fields)]).toEqual([k, want.map(fields)])
      }
      await c.quit()
    },
  )

  it('a sliding log entry that does not parse counts nothing', async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    await c.zadd(
      stateKey('unparsed-log', 'r', slidingLog({ limit: 3, window: '1h' }), 'k'),
      now - 1,
      'garbage',
      now - 1,
      `${now - 1}:1`,
    )
    const rules = createLimiter({
      rules: [{ name: 'r', algorithm: slidingLog({ limit: 3, window: '1h' }) }],
    }).rules
    const bound = redisStore({ client: c, clock: 'client', prefix: 'unparsed-log' }).bind(rules)
    const [good, k] = await Promise.all([bound.evaluate('good', 1, now), bound.evaluate('k', 1, now)])
    expect([good?.[0]?.remaining, k?.[0]?.remaining]).toEqual([2, 1])
    await c.quit()
  })

  // Full memory (maxmemory, noeviction): Redis refuses a script's first write that needs memory.
  it.each([
    { name: 'fixed window', algorithm: fixedWindow({ limit: 1, window: '1h' }) },
    { name: 'sliding log', algorithm: slidingLog({ limit: 1, window: '1h' }) },
  ])(
    'full memory ($name): in one batch a spent client is denied and a new one fails alone',
    async ({ algorithm }) => {
      const server = await startRedis()
      const c = new Redis({ port: server.port, host: server.host })
      try {
        const rules = createLimiter({ rules: [{ name: 'r', algorithm }] }).rules
        const bound = redisStore({ client: c, clock: 'client', prefix: 'oom' }).bind(rules)
        expect((await bound.evaluate('spent', 1, now))[0]?.allowed).toBe(true)
        const keys = await c.keys('*')
        await c.config('SET', 'maxmemory-policy', 'noeviction')
        await c.config('SET', 'maxmemory', '1')
        const before = await commandCalls(c, 'evalsha')
        // The peek leaves alone (nothing in flight on ioredis); the next three travel together.
        const results = await Promise.allSettled([
          bound.evaluate('warm', 0, now),
          bound.evaluate('spent', 1, now),
          bound.evaluate('fresh', 1, now),
          bound.evaluate('spent', 1, now),
        ])
        expect((await commandCalls(c, 'evalsha')) - before).toBe(2)
        expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
        for (const i of [1, 3]) {
          const verdict = (results[i] as PromiseFulfilledResult<readonly RuleVerdict[]>).value[0]
          expect([verdict?.allowed, verdict?.reason]).toEqual([false, 'limit-exceeded'])
        }
        const failed = (results[2] as PromiseRejectedResult).reason
        expect(failed).toMatchObject({ code: 'ERR_EDGELIMIT_STORE' })
        expect(String(failed.message)).toMatch(/OOM/)
        // Nothing was written for the new client.
        expect((await c.keys('*')).sort()).toEqual(keys.sort())
      } finally {
        await c.config('SET', 'maxmemory', '0')
        await c.quit()
        await server.stop()
      }
    },
  )

  // A state Redis can hold but whose TTL it would refuse (a token bucket's last refill far in the
  // future: TTL above 1e17 ms, which Lua sends to PX in exponent form): that decision fails and
  // writes nothing, its other rule included; the decisions before and after it are decided.
  it('a decision whose write Redis would refuse fails alone, writes nothing; its batch-mates are decided', async () => {
    const c = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    const prefix = 'refused'
    const limiter = createLimiter({
      rules: [
        { name: 'w', algorithm: fixedWindow({ limit: 10, window: '1h' }) },
        { name: 'b', algorithm: tokenBucket({ capacity: 10, refillRate: 1, refillInterval: '1h' }) },
      ],
    })
    const bound = redisStore({ client: c, clock: 'client', prefix }).bind(limiter.rules)
    await bound.evaluate('bad', 1, now)
    // The bucket's key, whatever the key format: its state is "levelSteps:lastMs", lastMs = now.
    const keys = await c.keys(`${prefix}:*`)
    const values = await Promise.all(keys.map((k) => c.get(k)))
    const bucket = keys.find((_, i) => values[i]?.endsWith(`:${now}`))
    expect(bucket).toBeDefined()
    await c.set(bucket as string, '1:900000000000000000')
    const stored = Object.fromEntries(await Promise.all(keys.map(async (k) => [k, await c.get(k)])))
    const results = await Promise.allSettled([
      bound.evaluate('warm', 0, now),
      bound.evaluate('good', 1, now),
      bound.evaluate('bad', 1, now),
      bound.evaluate('good', 1, now),
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
    const failed = (results[2] as PromiseRejectedResult).reason
    expect(failed).toMatchObject({ code: 'ERR_EDGELIMIT_STORE' })
    expect(String(failed.message)).toMatch(/TTL/)
    const good = results.flatMap((r, i) =>
      i % 2 === 1
        ? [(r as PromiseFulfilledResult<readonly RuleVerdict[]>).value.map((v) => v.remaining)]
        : [],
    )
    expect(good).toEqual([
      [9, 9],
      [8, 8],
    ])
    // Neither of the refused decision's keys changed.
    expect(Object.fromEntries(await Promise.all(keys.map(async (k) => [k, await c.get(k)])))).toEqual(stored)
    await c.quit()
  })

  it('decisions abandoned at their deadline are charged once, when Redis comes back', async () => {
    // No offline queue and no resend of unanswered commands: the batch is written once.
    const c = new Redis({
      port: fixture.redis.port,
      host: fixture.redis.host,
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      lazyConnect: true,
    })
    await c.connect()
    // On Redis TIME, a window the test cannot cross the end of: the count read back must be the batch's.
    const spec = fixedWindow({ limit: 1000, window: farWindow() })
    const limiter = createLimiter({
      rules: [{ name: 'w', algorithm: spec, onStoreError: 'open' }],
      store: redisStore({ client: c, prefix: 'dl' }),
      timeout: 50,
      breaker: false,
      denyCache: false,
      onEvent: (e) => {
        if (e.type === 'fallback') fallbacks++
      },
    })
    let fallbacks = 0
    await limiter.peek('k') // loads the script
    fixture.redis.pause()
    let ds: Awaited<ReturnType<typeof limiter.limit>>[]
    try {
      const started = performance.now()
      ds = await Promise.all(Array.from({ length: 20 }, () => limiter.limit('k')))
      expect(performance.now() - started).toBeLessThan(1000)
    } finally {
      fixture.redis.resume()
    }
    // Every decision fell back (fail-open) at its deadline; the store never answered in time.
    expect(ds.every((d) => d.allowed)).toBe(true)
    expect(fallbacks).toBe(20)
    // The one batch reaches Redis once it resumes: 20 decisions charged once each, never again.
    const admin = new Redis({ port: fixture.redis.port, host: fixture.redis.host })
    const dl = stateKey('dl', 'w', spec, 'k')
    const count = async () => Number(String(await admin.get(dl)).split(':')[1])
    for (let i = 0; i < 200 && (await admin.exists(dl)) === 0; i++) {
      await new Promise((r) => setTimeout(r, 10))
    }
    expect(await count()).toBe(20)
    expect((await limiter.limit('k')).remaining).toBe(1000 - 21)
    expect(await count()).toBe(21)
    await Promise.all([c.quit(), admin.quit()])
  })
})
