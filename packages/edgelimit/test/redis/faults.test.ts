import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLimiter,
  fixedWindow,
  gcra,
  type LimiterEvent,
  slidingLog,
  tokenBucket,
} from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { type RedisServer, startDelayProxy, startRedis } from '../support/redis.js'
import { stateKey } from '../support/state-key.js'
import { farWindow } from '../support/window.js'

// These tests are about the store itself: no deadline, breaker or denial cache in between.
const PURE = { timeout: false, breaker: false, denyCache: false } as const

let redis: RedisServer
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(() => redis?.stop())

const rules = [
  { name: 'burst', algorithm: tokenBucket({ capacity: 50, refillRate: 1, refillInterval: '1h' }) },
  { name: 'window', algorithm: fixedWindow({ limit: 400, window: '1h' }) },
  { name: 'log', algorithm: slidingLog({ limit: 400, window: '1h' }) },
  { name: 'gcra', algorithm: gcra({ limit: 400, period: '1h' }) },
]

describe('round trips', () => {
  // At most one command per decision: one each without coalescing; with it (the default), the
  // first of 200 decisions issued in one tick leaves alone (nothing was in flight) and the other
  // 199 share ⌈199 / 8⌉ = 25 EVALSHAs (maxBatch 8, the default for ioredis).
  it.each([
    { coalesce: false, evalsha: 200 },
    { coalesce: true, evalsha: 26 },
  ])(
    '200 decisions, coalesce: $coalesce → $evalsha EVALSHA and nothing else (INFO commandstats)',
    async ({ coalesce, evalsha }) => {
      const client = new Redis({ port: redis.port, host: redis.host })
      const store = redisStore({ client, prefix: `count${coalesce}`, coalesce })
      const limiter = createLimiter({ rules, store, ...PURE })
      await limiter.limit('warm') // loads the script once (NOSCRIPT → EVAL)
      await client.config('RESETSTAT')
      await Promise.all(Array.from({ length: 200 }, (_, i) => limiter.limit(`k${i % 7}`)))
      const stats = Object.fromEntries(
        (await client.info('commandstats'))
          .split('\n')
          .filter((l) => l.startsWith('cmdstat_'))
          .map((l) => [l.slice(8, l.indexOf(':')), Number(/calls=(\d+)/.exec(l)?.[1])]),
      )
      // commandstats also counts the commands a script runs inside Redis; the client sent EVALSHA only.
      expect(stats.evalsha).toBe(evalsha)
      const insideScripts = [
        'get',
        'set',
        'zrangebyscore',
        'zadd',
        'zrem',
        'zremrangebyscore',
        'pexpire',
        'time',
      ]
      const ours = ['config|resetstat', 'info']
      expect(
        Object.keys(stats).filter((c) => c !== 'evalsha' && !insideScripts.includes(c) && !ours.includes(c)),
      ).toEqual([])
      await client.quit()
    },
  )
})

describe('script loading', () => {
  it('SCRIPT FLUSH during a run causes zero failed decisions', async () => {
    const client = new Redis({ port: redis.port, host: redis.host })
    const admin = new Redis({ port: redis.port, host: redis.host })
    const limiter = createLimiter({ rules, store: redisStore({ client, prefix: 'flush' }), ...PURE })
    let failed = 0
    let admitted = 0
    for (let batch = 0; batch < 20; batch++) {
      // Flush between and during batches of 25 concurrent decisions over 5 keys.
      const flush = batch % 2 === 0 ? admin.script('FLUSH') : Promise.resolve()
      const results = await Promise.allSettled(
        Array.from({ length: 25 }, (_, i) => limiter.limit(`client-${i % 5}`)),
      )
      await flush
      failed += results.filter((r) => r.status === 'rejected').length
      admitted += results.filter((r) => r.status === 'fulfilled' && r.value.allowed).length
    }
    expect(failed).toBe(0)
    // 100 requests per key; the 50-token bucket admits exactly 50 of each.
    expect(admitted).toBe(5 * 50)
    const stats = await admin.info('commandstats')
    expect(stats).toMatch(/cmdstat_eval:calls=\d+/)
    await Promise.all([client.quit(), admin.quit()])
  })

  it('a Redis restart between runs causes zero failed decisions', async () => {
    const client = new Redis({ port: redis.port, host: redis.host })
    const limiter = createLimiter({ rules, store: redisStore({ client, prefix: 'restart' }), ...PURE })
    const run = async () => {
      const results = await Promise.allSettled(Array.from({ length: 60 }, () => limiter.limit('k')))
      return {
        failed: results.filter((r) => r.status === 'rejected').length,
        admitted: results.filter((r) => r.status === 'fulfilled' && r.value.allowed).length,
      }
    }
    expect(await run()).toEqual({ failed: 0, admitted: 50 })
    await redis.restart()
    // The client reconnects by itself; the restarted server has neither state nor scripts.
    await new Promise<void>((resolve) =>
      client.status === 'ready' ? resolve() : client.once('ready', resolve),
    )
    expect(await run()).toEqual({ failed: 0, admitted: 50 })
    await client.quit()
  })

  it('a failed reload (EVAL rejected after SCRIPT FLUSH) fails its decisions per onStoreError; nothing rejects unhandled', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    const client = new Redis({ port: redis.port, host: redis.host })
    const admin = new Redis({ port: redis.port, host: redis.host })
    try {
      const make = (onStoreError: 'open' | 'closed') =>
        createLimiter({
          // One token an hour: nothing refills during a run, however slow (Redis TIME is the clock).
          rules: [
            {
              name: 'tb',
              algorithm: tokenBucket({ capacity: 10, refillRate: 1, refillInterval: '1h' }),
              onStoreError,
            },
          ],
          store: redisStore({ client, prefix: `reload-${onStoreError}` }),
          timeout: '5s',
          breaker: false,
          denyCache: false,
        })
      const open = make('open')
      const closed = make('closed')
      await Promise.all([open.limit('k'), closed.limit('k')])
      // A restart or failover without the script, on a server out of memory: the reload's EVAL fails.
      await admin.script('FLUSH')
      await admin.config('SET', 'maxmemory', '1')
      const ds = await Promise.all([open.limit('k'), closed.limit('k'), open.limit('j'), closed.limit('j')])
      expect(ds.map((d) => [d.allowed, d.reason])).toEqual([
        [true, undefined],
        [false, 'store-unavailable'],
        [true, undefined],
        [false, 'store-unavailable'],
      ])
      // A script error in the reload (a client clock Lua cannot read as a number: arithmetic on
      // nil) fails that call only. (A NaN clock no longer raises: its TTL fails its decision.)
      await admin.config('SET', 'maxmemory', '0')
      await admin.script('FLUSH')
      const bound = redisStore({ client, prefix: 'reload-nan', clock: 'client' }).bind(open.rules)
      await expect(bound.evaluate('k', 1, 'x' as unknown as number)).rejects.toThrow(/ERR/)
      await new Promise((resolve) => setTimeout(resolve, 20))
      expect(unhandled).toEqual([])
      // The process goes on, and so does the store once Redis can run the script again: 'k' was
      // charged twice (the fail-open decision while the reload failed charged nothing).
      expect((await open.limit('k')).rules[0]?.remaining).toBe(8)
    } finally {
      process.off('unhandledRejection', onUnhandled)
      await admin.config('SET', 'maxmemory', '0')
      await Promise.all([client.quit(), admin.quit()])
    }
  })

  it('any error other than NOSCRIPT is an error, not a retry', async () => {
    const client = new Redis({ port: redis.port, host: redis.host })
    await client.lpush(
      stateKey('wrongtype', 'log', slidingLog({ limit: 400, window: '1h' }), 'k'),
      'not a sorted set',
    )
    const store = redisStore({ client, prefix: 'wrongtype' })
    const events: LimiterEvent[] = []
    const limiter = createLimiter({ rules, store, onEvent: (e) => events.push(e) })
    await expect(store.bind(limiter.rules).evaluate('k', 1, Date.now())).rejects.toThrow(/WRONGTYPE/)
    // Through the limiter the error is a fail-closed decision and a reported fault, not a throw.
    const d = await limiter.limit('k')
    expect([d.allowed, d.reason]).toEqual([false, 'store-unavailable'])
    const error = events.find((e) => e.type === 'store-error')
    expect(error?.type === 'store-error' && String(error.error)).toMatch(/WRONGTYPE/)
    await client.quit()
  })
})

describe('keys', () => {
  it('keys with lone UTF-16 surrogates stay distinct in Redis; other keys keep their bytes', async () => {
    const client = new Redis({ port: redis.port, host: redis.host })
    // On Redis TIME, a window the test cannot cross the end of: the second round must be denied.
    const spec = fixedWindow({ limit: 1, window: farWindow() })
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: spec }],
      store: redisStore({ client, prefix: 'sur' }),
      ...PURE,
    })
    // UTF-8 has no lone surrogates: sent as they are, the first three would all be `user\uFFFD`.
    const keys = [
      'user\uD800',
      'user\uDBFF',
      'user\uFFFD',
      'user\uDC00',
      '\uDC00\uD800',
      'a\uD83D\uDE00',
      'user',
      '%D800',
    ]
    const first = await Promise.all(keys.map((k) => limiter.limit(k)))
    const second = await Promise.all(keys.map((k) => limiter.limit(k)))
    expect(first.map((d) => d.allowed)).toEqual(keys.map(() => true))
    expect(second.map((d) => d.allowed)).toEqual(keys.map(() => false))
    expect((await client.keys('sur:*')).sort()).toEqual(
      ['user%D800', 'user%DBFF', 'user\uFFFD', 'user%DC00', '%DC00%D800', 'a\uD83D\uDE00', 'user', '%25D800']
        .map((tag) => stateKey('sur', 'r', spec, tag))
        .sort(),
    )
    await client.quit()
  })
})

describe('reset', () => {
  it('a store that does not answer or fails rejects the reset with a code, within the deadline', async () => {
    const own = await startRedis()
    // As the gateway builds its client: fail fast, no offline queue.
    const client = new Redis({
      port: own.port,
      host: own.host,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 100,
    })
    client.on('error', () => {})
    try {
      await new Promise((r) => client.once('ready', r))
      const limiter = createLimiter({ rules, store: redisStore({ client, prefix: 'reset' }), timeout: 200 })
      await limiter.limit('k')
      await limiter.reset('k')
      // Paused: the DEL is sent and never answered.
      own.pause()
      const paused = await limiter.reset('k').then(
        () => undefined,
        (e: unknown) => e,
      )
      own.resume()
      expect(paused).toMatchObject({ name: 'EdgelimitError', code: 'ERR_EDGELIMIT_TIMEOUT' })
      // Gone: the client refuses the command; its error (no code of ours) is the cause.
      await own.stop()
      await new Promise((r) => client.once('close', r))
      const gone = (await limiter.reset('k').then(
        () => undefined,
        (e: unknown) => e,
      )) as Error & { code?: string; cause?: Error }
      expect(gone).toMatchObject({ name: 'EdgelimitError', code: 'ERR_EDGELIMIT_STORE' })
      expect(gone.message).toMatch(/^reset failed: ./)
      expect(gone.cause).toBeInstanceOf(Error)
    } finally {
      client.disconnect()
      await own.stop()
    }
  })
})

describe('reset with a long deadline', () => {
  it('a reset the store answers in a few ms succeeds under a timeout beyond what one timer holds', async () => {
    // `timeout: '30d'` is a valid deadline, but a timer of more than 2^31 - 1 ms fires after 1 ms:
    // every reset through a store 2 ms away failed with "did not answer within 2592000000 ms".
    const proxy = await startDelayProxy({ host: redis.host, port: redis.port }, 2)
    const client = new Redis({ port: proxy.port, host: redis.host, lazyConnect: true })
    try {
      await client.connect()
      const limiter = createLimiter({
        rules,
        store: redisStore({ client, prefix: 'reset-long' }),
        timeout: '30d',
        breaker: false,
      })
      await expect(limiter.reset('k')).resolves.toBeUndefined()
    } finally {
      client.disconnect()
      await proxy.close()
    }
  })
})
