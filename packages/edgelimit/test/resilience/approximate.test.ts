/**
 * Approximate consistency on a real redis-server (test/support/redis-client.ts), driven by a
 * manual clock: `limiter.reset`, a key's first requests in flight together (their replies held by
 * a gate in front of the client) and the counter's eviction of keys (with room for 10 keys instead
 * of 100,000, through the same `create` that `approximate` holds), and syncs whose replies come
 * after the deadline (on fake timers: the deadline's clock only; Redis answers in real time).
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createRateLimit } from '../../src/http.js'
import {
  type AlgorithmSpec,
  approximate,
  type Clock,
  createLimiter,
  type Duration,
  fixedWindow,
  gcra,
  type Limiter,
  leakyBucket,
  slidingLog,
  tokenBucket,
} from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { type ApproximateConsistency, createApproximate } from '../../src/resilience/approximate.js'
import { manualClock } from '../../src/testing/index.js'
import { redisFixture } from '../support/redis-client.js'
import { stateKey } from '../support/state-key.js'

const fixture = redisFixture()
const T0 = 1_700_000_000_000

/** The count a fixed window holds in Redis ("windowIndex:count"). */
async function stored(key: string): Promise<number> {
  const value = await fixture.client.get(key)
  return value === null ? 0 : Number(value.split(':')[1])
}

/**
 * The fixture's client, its script replies held while `hold` is set (a batch still travelling)
 * until `release()` delivers the oldest one.
 */
function gated() {
  const redis = fixture.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
  const held: (() => Promise<void>)[] = []
  const gate = {
    hold: false,
    held: () => held.length,
    /** Delivers the oldest held reply, and lets what waited for it go on. */
    async release() {
      await held.shift()?.()
      await new Promise((resolve) => setImmediate(resolve))
    },
    client: {} as Record<string, (...args: unknown[]) => Promise<unknown>>,
  }
  const through =
    (name: string) =>
    (...args: unknown[]): Promise<unknown> => {
      const reply = (redis[name] as (...a: unknown[]) => Promise<unknown>).apply(fixture.client, args)
      if (!gate.hold) return reply
      return new Promise((resolve, reject) => {
        held.push(() => reply.then(resolve, reject))
      })
    }
  gate.client = { evalsha: through('evalsha'), eval: through('eval'), del: through('del') }
  return gate
}

/** One fixed-window rule (per hour) counted in process and synced to the fixture's Redis. */
function onRedis(o: {
  prefix: string
  limit: number
  consistency: ApproximateConsistency
  syncInterval: Duration
  clock?: ReturnType<typeof manualClock>
  client?: unknown
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
    store: redisStore({ client: o.client ?? fixture.client, prefix: o.prefix, clock: 'client' }),
    clock: o.clock ?? manualClock(T0),
    timeout: false,
    breaker: false,
  })
}

/**
 * Limiters of one rule on the fixture's Redis and one manual clock, per store prefix: strict, or
 * with `consistency` (synced every 250 ms).
 */
function resetLimiter(algorithm: AlgorithmSpec, clock: Clock) {
  return (prefix: string, consistency?: ApproximateConsistency) =>
    createLimiter({
      rules: [{ name: 'api', algorithm, ...(consistency ? { consistency, syncInterval: '250ms' } : {}) }],
      store: redisStore({ client: fixture.client, prefix, clock: 'client' }),
      clock,
      timeout: false,
      breaker: false,
    })
}

/**
 * The key seeded by a peek (a fresh key: 0), then 3 admissions 10 ms apart, before any sync: one
 * process, so the store would answer what strict answers. Each step's [strict, approximate]
 * resetAfterMs.
 */
async function resetsBeforeSync(clock: ReturnType<typeof manualClock>, strict: Limiter, approx: Limiter) {
  const resets: [number, number][] = []
  for (const dt of [0, 10, 10, 10]) {
    clock.advance(dt)
    const [s, a] = await Promise.all(
      dt === 0 ? [strict.peek('k'), approx.peek('k')] : [strict.limit('k'), approx.limit('k')],
    )
    resets.push([s.resetAfterMs, a.resetAfterMs])
  }
  return resets
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
    expect(
      await fixture.client.exists(stateKey('ar', 'api', fixedWindow({ limit: 3, window: '1h' }), 'k')),
    ).toBe(0)
    // A fresh key again, here as in Redis; the admissions from before the reset are never synced.
    expect(await four()).toEqual([true, true, true, false])
    await limiter.flush()
    expect(await stored(stateKey('ar', 'api', fixedWindow({ limit: 3, window: '1h' }), 'k'))).toBe(3)
  })

  it('first requests in flight together: the first answer seeds the key, the others are counted here', async () => {
    const gate = gated()
    const limiter = onRedis({
      prefix: 'af',
      limit: 10,
      consistency: approximate,
      syncInterval: '1s',
      client: gate.client,
    })
    // The script is loaded before replies are held.
    await limiter.limit('warm')
    const results: Promise<boolean>[] = []
    const admit = () => {
      const allowed = limiter.limit('k').then((d) => d.allowed)
      results.push(allowed)
      return allowed
    }
    gate.hold = true
    admit()
    await new Promise((resolve) => setImmediate(resolve))
    // Another first request while the first one's batch travels.
    admit()
    await new Promise((resolve) => setImmediate(resolve))
    // The first reply seeds the key (remaining 9); four more are admitted here, pending.
    await gate.release()
    for (let i = 0; i < 4; i++) await admit()
    // The other first request's reply, had it gone to Redis in a later batch, comes now.
    while (gate.held() > 0) await gate.release()
    gate.hold = false
    for (let i = 0; i < 20; i++) await admit()
    const admitted = (await Promise.all(results)).filter(Boolean).length
    await limiter.flush()
    expect([
      admitted,
      await stored(stateKey('af', 'api', fixedWindow({ limit: 10, window: '1h' }), 'k')),
    ]).toEqual([10, 10])
  })

  it("limiter.reset(key) while the key's first request is in flight: that answer seeds nothing", async () => {
    const gate = gated()
    const limiter = onRedis({
      prefix: 'ai',
      limit: 5,
      consistency: approximate,
      syncInterval: '1s',
      client: gate.client,
    })
    const strict = createLimiter({
      rules: [{ name: 'api', algorithm: fixedWindow({ limit: 5, window: '1h' }) }],
      store: redisStore({ client: fixture.client, prefix: 'ai', clock: 'client' }),
      clock: manualClock(T0),
      timeout: false,
      breaker: false,
    })
    await limiter.limit('warm')
    // Spent by another process.
    for (let i = 0; i < 5; i++) await strict.limit('k')
    gate.hold = true
    const first = limiter.limit('k')
    await new Promise((resolve) => setImmediate(resolve))
    // The store's reset waits for the batch in flight, whose reply is the state before it.
    const reset = limiter.reset('k')
    while (gate.held() > 0) await gate.release()
    gate.hold = false
    await reset
    expect((await first).allowed).toBe(false)
    expect(
      await fixture.client.exists(stateKey('ai', 'api', fixedWindow({ limit: 5, window: '1h' }), 'k')),
    ).toBe(0)
    const allowed: boolean[] = []
    for (let i = 0; i < 6; i++) allowed.push((await limiter.limit('k')).allowed)
    expect(allowed).toEqual([true, true, true, true, true, false])
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
    expect(await stored(stateKey('ae', 'api', fixedWindow({ limit: 100, window: '1h' }), 'victim'))).toBe(1)
    // 50 other keys push the victim out of the 10 entries, more than once.
    for (let i = 0; i < 50; i++) await limiter.limit(`other${i}`)
    await limiter.flush()
    expect(await stored(stateKey('ae', 'api', fixedWindow({ limit: 100, window: '1h' }), 'victim'))).toBe(100)
    expect(await admitted('victim', 100)).toBe(0)
  })

  it("one sync interval per limiter: the shortest of its approximate rules' syncInterval", async () => {
    // Store calls for 101 decisions of one key, one every 10 ms over a second, each decision
    // waiting for the sync it started (syncs ride on requests) to be answered.
    const calls = async (prefix: string, intervals: Duration[]) => {
      let sent = 0
      const travelling = new Set<Promise<unknown>>()
      const redis = fixture.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
      const counted =
        (name: string) =>
        (...args: unknown[]): Promise<unknown> => {
          sent++
          const reply = (redis[name] as (...a: unknown[]) => Promise<unknown>).apply(fixture.client, args)
          const done = () => travelling.delete(reply)
          travelling.add(reply)
          // A script not loaded yet (NOSCRIPT) is sent again with EVAL: one store call.
          reply.then(done, (error) => {
            if (/NOSCRIPT/.test(String(error))) sent--
            done()
          })
          return reply
        }
      const clock = manualClock(T0)
      const limiter = createLimiter({
        rules: intervals.map((syncInterval, i) => ({
          name: `r${i}`,
          algorithm: fixedWindow({ limit: 100_000, window: '1h' }),
          consistency: approximate,
          syncInterval,
        })),
        store: redisStore({
          client: { evalsha: counted('evalsha'), eval: counted('eval'), del: counted('del') },
          prefix,
          clock: 'client',
        }),
        clock,
        timeout: false,
        breaker: false,
      })
      for (let t = 0; t <= 1000; t += 10) {
        clock.set(T0 + t)
        await limiter.limit('k')
        while (travelling.size > 0) {
          await Promise.allSettled([...travelling])
          await new Promise((resolve) => setImmediate(resolve))
        }
      }
      return sent
    }
    // The key's first decision, then one sync per interval (at 50, 100, … 1000 ms for '50ms').
    expect(await calls('as1', ['1s'])).toBe(2)
    expect(await calls('as2', ['50ms'])).toBe(21)
    // A '1s' rule next to a '50ms' one syncs every 50 ms too: both rules' counts go in each sync.
    expect(await calls('as3', ['1s', '50ms'])).toBe(21)
    expect(await calls('as4', ['50ms', '1s'])).toBe(21)
  })

  it('Retry-After of an approximate denial: the next sync, then, spent and synced, the window reset', async () => {
    const clock = manualClock(T0)
    const limiter = onRedis({
      prefix: 'aw',
      limit: 3,
      consistency: approximate,
      syncInterval: '250ms',
      clock,
    })
    const rl = createRateLimit({ limiter })
    const retryAfter = async () => {
      const v = await rl.check({ method: 'GET', path: '/', peer: '203.0.113.5', header: () => null })
      return [v.decision?.retryAfterMs, v.response?.headers.find(([k]) => k === 'retry-after')?.[1]]
    }
    for (let i = 0; i < 3; i++) await retryAfter()
    expect(await retryAfter()).toEqual([250, '1'])
    // Due: this request starts the sync (its answer counts from the next request on).
    clock.advance(300)
    expect(await retryAfter()).toEqual([250, '1'])
    await limiter.flush()
    // Spent and synced: no sync is coming before the window resets (T0 is 800 s into its hour).
    clock.advance(300)
    const reset = 3_600_000 - (T0 % 3_600_000) - 600
    expect(await retryAfter()).toEqual([reset, String(Math.ceil(reset / 1000))])
  })

  it('a cost above what a rule can ever admit is cost-exceeds-limit with no finite retry, decided here as by the store', async () => {
    const clock = manualClock(T0)
    // Each limit a cost of 11 exceeds: a window's 10, a GCRA's burst of 5, a shaping queue of 2 (3 slots).
    const algorithms = [
      fixedWindow({ limit: 10, window: '1h' }),
      gcra({ limit: 1, period: '1s', burst: 5 }),
      leakyBucket({ capacity: 2, leakRate: 1, mode: 'shape' }),
    ]
    const limiter = createLimiter({
      rules: algorithms.map((algorithm, i) => ({
        name: `r${i}`,
        algorithm,
        consistency: approximate,
        syncInterval: '250ms',
      })),
      store: redisStore({ client: fixture.client, prefix: 'ax', clock: 'client' }),
      clock,
      timeout: false,
      breaker: false,
    })
    const ask = async (cost: number) => {
      const d = await limiter.limit('k', { cost })
      return [d.allowed, d.reason, d.retryAfterMs, d.rules.map((r) => r.reason ?? 'admitted')]
    }
    const never = [
      false,
      'cost-exceeds-limit',
      Number.POSITIVE_INFINITY,
      algorithms.map(() => 'cost-exceeds-limit'),
    ]
    // The key's first request is the store's; the next are decided here, also after a sync.
    expect(await ask(11)).toEqual(never)
    expect(await ask(11)).toEqual(never)
    expect((await ask(1))[0]).toBe(true)
    clock.advance(300)
    expect(await ask(11)).toEqual(never)
    expect(await ask(11)).toEqual(never)
  })
  it("a bucket's or GCRA's resetAfterMs counts what was admitted here, as the store does", async () => {
    const algorithms = [
      tokenBucket({ capacity: 5, refillRate: 1 }),
      leakyBucket({ capacity: 5, leakRate: 1 }),
      gcra({ limit: 5, period: '5s' }),
    ]
    for (const [n, algorithm] of algorithms.entries()) {
      const clock = manualClock(T0)
      const limiter = resetLimiter(algorithm, clock)
      const approx = limiter(`ab${n}`, approximate)
      // Strict on a store of its own, and strict on the approximate limiter's store.
      const [strict, truth] = [limiter(`ab${n}s`), limiter(`ab${n}`)]
      const before = await resetsBeforeSync(clock, strict, approx)
      expect(before.map(([, a]) => a)).toEqual(before.map(([s]) => s))
      // A sync (started at 330, it charges the batch then) and admissions after it: the store's
      // state once they are in it, to the millisecond (whole-ms units).
      let last = 0
      for (const dt of [300, 10, 10]) {
        clock.advance(dt)
        last = (await approx.limit('k')).resetAfterMs
        await fixture.client.ping()
      }
      await approx.flush()
      expect([n, last]).toEqual([n, (await truth.peek('k')).resetAfterMs])
    }
  })

  it("a fixed window's or sliding log's resetAfterMs counts what was admitted here, as the store would", async () => {
    const algorithms = [fixedWindow({ limit: 5, window: '10s' }), slidingLog({ limit: 5, window: '10s' })]
    for (const [n, algorithm] of algorithms.entries()) {
      const clock = manualClock(T0 + 2500)
      const limiter = resetLimiter(algorithm, clock)
      const [approx, strict] = [limiter(`aw${n}`, approximate), limiter(`aw${n}s`)]
      const resets = await resetsBeforeSync(clock, strict, approx)
      expect([n, resets.map(([, a]) => a)]).toEqual([n, resets.map(([s]) => s)])
    }
  })
})

describe('approximate syncs whose replies are lost, on Redis', () => {
  it('a lost reply (counted in Redis) lowers no later window: each admits the limit', async () => {
    const gate = gated()
    // Replies not held: each request waits for them (syncs ride on requests, decided locally).
    const travelling = new Set<Promise<unknown>>()
    const client = Object.fromEntries(
      Object.entries(gate.client).map(([name, call]) => [
        name,
        (...args: unknown[]) => {
          const reply = call(...args)
          if (!gate.hold) {
            travelling.add(reply)
            const done = () => travelling.delete(reply)
            reply.then(done, done)
          }
          return reply
        },
      ]),
    )
    const clock = manualClock(T0 - (T0 % 60_000) + 60_000)
    const limiter = createLimiter({
      rules: [
        {
          name: 'api',
          algorithm: fixedWindow({ limit: 100, window: '1m' }),
          consistency: approximate,
          syncInterval: '1s',
        },
      ],
      store: redisStore({ client, prefix: 'ag', clock: 'client' }),
      clock,
      // A client with no timeout of its own: a lost reply never settles the sync.
      timeout: false,
      breaker: false,
    })
    const admitted: number[] = []
    for (let w = 0; w < 5; w++) {
      let n = 0
      for (let t = 0; t < 60_000; t += 250) {
        // In windows 0 to 2, the reply of the sync due 5 s in is lost (Redis ran the script).
        gate.hold = w < 3 && t === 5_000
        if ((await limiter.limit('k')).allowed) n++
        await new Promise((resolve) => setImmediate(resolve))
        gate.hold = false
        while (travelling.size > 0) {
          await Promise.allSettled([...travelling])
          await new Promise((resolve) => setImmediate(resolve))
        }
        clock.advance(250)
      }
      admitted.push(n)
    }
    expect(gate.held()).toBe(3)
    // Each window admits its 100 (88 in each from the third on, when lost batches were taken off
    // every later answer).
    expect(admitted).toEqual([100, 100, 100, 100, 100])
    await limiter.flush()
    expect(await stored(stateKey('ag', 'api', fixedWindow({ limit: 100, window: '1m' }), 'k'))).toBe(100)
  })
})

describe('approximate syncs past the deadline, on Redis', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('a sync whose reply comes after the deadline counts once: its batch is not sent again', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
    const gate = gated()
    const clock = manualClock(T0)
    const events: string[] = []
    const limiter = createLimiter({
      rules: [
        {
          name: 'api',
          algorithm: fixedWindow({ limit: 100_000, window: '1h' }),
          consistency: approximate,
          syncInterval: '50ms',
        },
      ],
      store: redisStore({ client: gate.client, prefix: 'al', clock: 'client' }),
      clock,
      timeout: '20ms',
      breaker: false,
      onEvent: (e) => {
        if (e.type === 'store-error') events.push(e.kind)
      },
    })
    let admitted = 0
    const admit = async () => {
      if ((await limiter.limit('k')).allowed) admitted++
    }
    // The first call is the store's (answered in time); the next five are counted here.
    for (let i = 0; i < 6; i++) await admit()
    // A slow store: each sync runs in Redis at once, but its reply comes 30 ms later, past the
    // 20 ms deadline; requests go on meanwhile.
    for (let round = 0; round < 6; round++) {
      clock.advance(50)
      gate.hold = true
      await admit() // due: starts the sync, whose reply is held
      for (let i = 0; i < 4; i++) await admit()
      await vi.advanceTimersByTimeAsync(30)
      await new Promise((resolve) => setImmediate(resolve))
      gate.hold = false
      while (gate.held() > 0) await gate.release()
    }
    await limiter.flush()
    expect(events).toEqual(Array(6).fill('timeout'))
    expect(admitted).toBe(36)
    // Each admission is charged once (it was charged 141 times before: each timed-out sync's
    // batch went again with the next one).
    expect(await stored(stateKey('al', 'api', fixedWindow({ limit: 100_000, window: '1h' }), 'k'))).toBe(36)
  })
})

describe('approximate consistency on Redis, a key whose quota is spent', () => {
  /** `n` processes on one key space: approximate limiters of one rule, syncing every 100 ms. */
  function processes(n: number, algorithm: ReturnType<typeof tokenBucket>, prefix: string, clock: Clock) {
    return Array.from({ length: n }, () =>
      createLimiter({
        rules: [{ name: 'api', algorithm, consistency: approximate, syncInterval: '100ms' }],
        store: redisStore({ client: fixture.client, prefix, clock: 'client' }),
        clock,
        timeout: false,
        breaker: false,
      }),
    )
  }

  /** The syncs the requests started are answered (Redis replies in order) before time moves on. */
  async function answered(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve))
    await fixture.client.ping()
    await new Promise((resolve) => setImmediate(resolve))
  }

  it('a client that waits the retryAfterMs of a spent key is admitted then, as in strict mode', async () => {
    // Window and bucket from a fresh key at T0 (at a 10 s boundary): 3 at once, then the window's
    // end (10 s), or the bucket's next token (1 s after the first: refill 1/s).
    const cases = [
      { algorithm: fixedWindow({ limit: 3, window: '10s' }), at: 10_000 },
      { algorithm: tokenBucket({ capacity: 3, refillRate: 1 }), at: 1000 },
    ]
    for (const [n, { algorithm, at }] of cases.entries()) {
      const clock = manualClock(T0)
      const [limiter] = processes(1, algorithm as ReturnType<typeof tokenBucket>, `aq${n}`, clock)
      if (limiter === undefined) throw new Error('no limiter')
      const seen: [number, boolean, number][] = []
      for (let i = 0; i < 3; i++) await limiter.limit('k')
      // Denied: retry when told (the next sync, then, spent and synced, when the store admits again).
      for (let i = 0; i < 5 && seen.at(-1)?.[1] !== true; i++) {
        const d = await limiter.limit('k')
        seen.push([clock.now() - T0, d.allowed, d.retryAfterMs])
        await answered()
        if (!d.allowed) clock.advance(d.retryAfterMs)
      }
      // The last denial's wait ended at `at`, and the request then was admitted.
      const [t, allowed] = seen.at(-1) ?? []
      expect([n, t, allowed]).toEqual([n, at, true])
    }
  })

  it('a spent token bucket admits again at its refill rate, not only once full again', async () => {
    // Two processes on one key, each a request every 20 ms, against 20 tokens refilling 5/s.
    const clock = manualClock(T0)
    const limiters = processes(2, tokenBucket({ capacity: 20, refillRate: 5 }), 'ab', clock)
    const perSecond: number[] = new Array(6).fill(0)
    for (let t = 0; t < 6000; t += 20) {
      for (const limiter of limiters) {
        const s = Math.floor(t / 1000)
        if ((await limiter.limit('k')).allowed) perSecond[s] = (perSecond[s] ?? 0) + 1
      }
      await answered()
      clock.advance(20)
    }
    await Promise.all(limiters.map((l) => l.flush()))
    // Strict: 20 at once, then 5/s (before, nothing until the bucket was full again, 4 s later).
    // Approximate: the first second's over-admission (the other process's batch) is paid back in
    // the next one, and then each second admits the refill.
    const [first = 0, second = 0] = perSecond
    expect(first).toBeGreaterThanOrEqual(20)
    expect(first + second).toBeLessThanOrEqual(20 + 5 + 10)
    for (const n of perSecond.slice(2)) {
      expect(n).toBeGreaterThanOrEqual(4)
      expect(n).toBeLessThanOrEqual(6)
    }
  })

  it('a fixed window: a batch admitted in one window and synced after it ends is not charged to the next', async () => {
    // Three processes on one key, each a request every 10 ms, against 300 per second: admissions
    // go on to each window's end, and the last batches reach Redis after it.
    const clock = manualClock(T0)
    const limiters = processes(3, fixedWindow({ limit: 300, window: '1s' }), 'aw', clock)
    const perWindow: number[] = new Array(4).fill(0)
    for (let t = 0; t < 4000; t += 10) {
      const w = Math.floor((T0 + t) / 1000) - Math.floor(T0 / 1000)
      for (const limiter of limiters) {
        if ((await limiter.limit('k')).allowed) perWindow[w] = (perWindow[w] ?? 0) + 1
      }
      await answered()
      clock.advance(10)
    }
    await Promise.all(limiters.map((l) => l.flush()))
    // Each window admits its 300 (before, the previous window's last batches took some of them).
    expect(perWindow).toEqual([300, 300, 300, 300])
  })
})
