// The Durable Object store and object beyond the conformance suite: options, sharding, state that
// survives a restart of the runtime, the object's own clock, the SQLite requirement, waitUntil,
// and the built `edgelimit/cloudflare` entry as a Worker imports it.
import { AsyncLocalStorage } from 'node:async_hooks'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  ConfigError,
  createLimiter,
  fixedWindow,
  gcra,
  memoryStore,
  slidingLog,
  tokenBucket,
} from '../../src/index.js'
import { encodeRules, shardOf } from '../../src/stores/durable-object/protocol.js'
import { durableObjectStore } from '../../src/stores/durable-object/store.js'
import { pkg, type Running, startWorker, storageDir } from './support/workerd.js'

const entry = join(import.meta.dirname, 'support', 'worker.ts')
const T0 = 1_700_000_000_000

/** The rules of a limiter as the object receives them. */
function specOf(rules: Parameters<typeof createLimiter>[0]['rules']): string {
  return encodeRules(createLimiter({ rules }).rules)
}

/**
 * Runs `work` and counts the timers it set that still hold the process once it has settled:
 * neither fired nor cleared, and not unref'd. Only timers set in `work`'s own async context count
 * (an AsyncLocalStorage marks it): the test runner's timers (its throttled task updates) come and
 * go meanwhile, so the process's count of active timers cannot tell.
 */
async function timersLeftBy(work: () => Promise<unknown>): Promise<number> {
  const marked = new AsyncLocalStorage<true>()
  const live = new Set<NodeJS.Timeout>()
  const { setTimeout: set, clearTimeout: clear } = globalThis
  globalThis.setTimeout = ((fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    if (marked.getStore() !== true) return set(fn, ms, ...args)
    const timer = set(
      (...a: unknown[]) => {
        live.delete(timer)
        fn(...a)
      },
      ms,
      ...args,
    )
    live.add(timer)
    return timer
  }) as typeof setTimeout
  globalThis.clearTimeout = ((timer?: NodeJS.Timeout) => {
    if (timer !== undefined) live.delete(timer)
    clear(timer)
  }) as typeof clearTimeout
  try {
    await marked.run(true, work)
  } finally {
    globalThis.setTimeout = set
    globalThis.clearTimeout = clear
  }
  return [...live].filter((timer) => timer.hasRef()).length
}

async function rpc(worker: Running, body: Record<string, unknown>) {
  const res = await worker.fetch('/rpc', { method: 'POST', body: JSON.stringify(body) })
  return { status: res.status, body: (await res.json()) as Record<string, unknown>[] & { error?: string } }
}

describe('durableObjectStore options', () => {
  const namespace = { idFromName: (name: string) => name, get: () => ({}) }

  it('reports every invalid option at once, with its path', () => {
    const bad = () =>
      durableObjectStore({
        namespace: {} as never,
        shards: 0,
        clock: 'server' as never,
        prefix: '',
        locationHint: 5 as never,
      })
    expect(bad).toThrow(ConfigError)
    try {
      bad()
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => [i.path, i.code])).toEqual([
        ['namespace', 'ERR_NAMESPACE'],
        ['shards', 'ERR_INTEGER'],
        ['clock', 'ERR_CHOICE'],
        ['prefix', 'ERR_STRING'],
        ['locationHint', 'ERR_STRING'],
      ])
    }
  })

  it('refuses an option name it does not know', () => {
    const bad = () => durableObjectStore({ namespace, shard: 4, locationhint: 'weur' } as never)
    expect(bad).toThrow(ConfigError)
    try {
      bad()
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => [i.path, i.code])).toEqual([
        ['shard', 'ERR_UNKNOWN_OPTION'],
        ['locationhint', 'ERR_UNKNOWN_OPTION'],
      ])
    }
    expect(
      durableObjectStore({ namespace, shards: 4, clock: 'client', prefix: 'p', locationHint: 'weur' }).name,
    ).toBe('durable-object')
  })

  it('maps a key to one object per key, or to its shard', async () => {
    const names: string[] = []
    const spy = {
      idFromName: (name: string) => {
        names.push(name)
        return name
      },
      get: () => ({ evaluate: async () => [], reset: async () => undefined }),
    }
    await durableObjectStore({ namespace: spy }).bind([]).evaluate('ip:abc', 1, 0)
    await durableObjectStore({ namespace: spy, shards: 8, prefix: 'p' }).bind([]).evaluate('ip:abc', 1, 0)
    expect(names).toEqual(['edgelimit:k:ip:abc', `p:s:8:${shardOf('ip:abc', 8)}`])
    expect(durableObjectStore({ namespace }).name).toBe('durable-object')
  })

  it("reset waits for the object within the limiter's deadline, also one beyond what a timer holds, and leaves no timer behind", async () => {
    // An object that answers a reset after 30 ms.
    const slow = {
      idFromName: (name: string) => name,
      get: () => ({
        evaluate: async () => [],
        reset: () => new Promise<void>((resolve) => setTimeout(resolve, 30)),
      }),
    }
    const outcomes: string[] = []
    for (const timeout of ['1h', '30d'] as const) {
      const limiter = createLimiter({
        rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1s' }) }],
        store: durableObjectStore({ namespace: slow }),
        timeout,
      })
      // '30d' is more than a timer holds (2^31 - 1 ms): such a timer fires after 1 ms.
      const left = await timersLeftBy(() =>
        limiter.reset('k').then(
          () => outcomes.push(`${timeout}: reset`),
          (error: Error) => outcomes.push(`${timeout}: ${error.message}`),
        ),
      )
      // The deadline's timer goes with the answer: a process that is done can exit.
      expect(left, timeout).toBe(0)
    }
    expect(outcomes).toEqual(['1h: reset', '30d: reset'])
  })

  it('a reset past a deadline beyond what a timer holds names the wait it timed, not the deadline', async () => {
    // On Node a timer above 2^31 - 1 ms fires at once, so a '30d' deadline waits 2e9 ms (23 days);
    // the error said "did not answer within 2592000000 ms" after 2e9.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const hung = {
        idFromName: (name: string) => name,
        get: () => ({ evaluate: async () => [], reset: () => new Promise<void>(() => {}) }),
      }
      const limiter = createLimiter({
        rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1s' }) }],
        store: durableObjectStore({ namespace: hung }),
        timeout: '30d',
      })
      const outcome = limiter.reset('k').then(
        () => 'reset',
        (error: Error) => error.message,
      )
      await vi.advanceTimersByTimeAsync(2e9 - 1)
      const early = await Promise.race([outcome, Promise.resolve('pending')])
      await vi.advanceTimersByTimeAsync(1)
      expect([early, await outcome]).toEqual(['pending', expect.stringContaining('within 2000000000 ms')])
    } finally {
      vi.useRealTimers()
    }
  })

  it('shards keys stably and evenly', () => {
    expect([shardOf('', 16), shardOf('a', 16), shardOf('ip:203.0.113.7', 1000)]).toEqual([5, 12, 913])
    const counts = new Array<number>(16).fill(0)
    for (let i = 0; i < 16_000; i++) {
      const shard = shardOf(`ip:client-${i}`, 16)
      counts[shard] = (counts[shard] ?? 0) + 1
    }
    expect(Math.min(...counts)).toBeGreaterThan(850)
    expect(Math.max(...counts)).toBeLessThan(1150)
  })

  it('an unreachable object is a rejection, which the limiter answers by its failure policy', async () => {
    const broken = {
      idFromName: (name: string) => name,
      get: () => {
        throw new Error('no such object')
      },
    }
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1s' }) }],
      store: durableObjectStore({ namespace: broken }),
    })
    const d = await limiter.limit('k')
    expect([d.allowed, d.reason]).toEqual([false, 'store-unavailable'])
  })

  it('a failed call is ERR_EDGELIMIT_STORE with the original as its cause, named in its message, also when it is not an Error', async () => {
    const gone = new TypeError('no such object')
    const failing = (reason: unknown) => ({
      idFromName: (name: string) => name,
      get: () => ({ evaluate: () => Promise.reject(reason), reset: () => Promise.reject(reason) }),
    })
    const outcome = async (reason: unknown) => {
      const errors: unknown[] = []
      const limiter = createLimiter({
        rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1s' }) }],
        store: durableObjectStore({ namespace: failing(reason) }),
        breaker: false,
        onEvent: (e) => {
          if (e.type === 'store-error') errors.push(e.error)
        },
      })
      await limiter.limit('k')
      errors.push(await limiter.reset('k').catch((error: unknown) => error))
      return errors.map((e) => {
        const { code, message, cause } = e as { code?: string; message: string; cause?: unknown }
        return { code, message, same: cause === reason }
      })
    }
    // A store-error event for the decision's call and one for the reset's, then the reset's rejection.
    const thrown = await outcome(gone)
    const refused = await outcome('object overloaded')
    const emptied = await outcome(new RangeError(''))
    expect([thrown, refused, emptied]).toEqual([
      [0, 1, 2].map(() => ({ code: 'ERR_EDGELIMIT_STORE', message: 'no such object', same: true })),
      [0, 1, 2].map(() => ({ code: 'ERR_EDGELIMIT_STORE', message: 'object overloaded', same: true })),
      [0, 1, 2].map(() => ({ code: 'ERR_EDGELIMIT_STORE', message: 'RangeError', same: true })),
    ])
  })
})

describe('EdgelimitDurableObject in workerd', () => {
  let worker: Running
  beforeAll(async () => {
    worker = await startWorker(entry, {
      durableObjects: {
        LIMITER: 'EdgelimitDurableObject',
        SWEEP: 'QuickSweep',
        FIXED: 'FixedWindowOnly',
        SEEDED: 'SeededLog',
      },
    })
  })
  afterAll(() => worker?.dispose())

  it("with clock 'object', decides by the object's own clock", async () => {
    const rules = specOf([{ name: 'hourly', algorithm: gcra({ limit: 1, period: '1h' }) }])
    const before = Date.now()
    const first = await rpc(worker, { object: 'own-clock', rules, key: 'k', cost: 1 })
    const second = await rpc(worker, { object: 'own-clock', rules, key: 'k', cost: 1 })
    const elapsed = Date.now() - before
    expect(first.body[0]?.allowed).toBe(true)
    expect(second.body[0]?.allowed).toBe(false)
    const retry = second.body[0]?.retryAfterMs as number
    expect(retry).toBeLessThanOrEqual(3_600_000)
    expect(retry).toBeGreaterThanOrEqual(3_600_000 - elapsed - 1)
  })

  it('a rule renamed onto another algorithm starts fresh', async () => {
    const fw = specOf([{ name: 'x', algorithm: fixedWindow({ limit: 1, window: '1h' }) }])
    const tb = specOf([
      { name: 'x', algorithm: tokenBucket({ capacity: 1, refillRate: 1, refillInterval: '1h' }) },
    ])
    const call = (rules: string) => rpc(worker, { object: 'rename', rules, key: 'k', cost: 1, now: T0 })
    expect((await call(fw)).body[0]?.allowed).toBe(true)
    expect((await call(fw)).body[0]?.allowed).toBe(false)
    expect((await call(tb)).body[0]?.allowed).toBe(true)
  })

  it('limiters reusing a rule name with different algorithms keep their own state', async () => {
    // Audit defect 1: rows keyed by (key, rule) alone made each limiter overwrite the other's
    // state, and both admitted everything.
    const fw = specOf([{ name: 'api', algorithm: fixedWindow({ limit: 3, window: '60s' }) }])
    const tb = specOf([
      { name: 'api', algorithm: tokenBucket({ capacity: 3, refillRate: 1, refillInterval: '1m' }) },
    ])
    const call = (rules: string) => rpc(worker, { object: 'shared-name', rules, key: 'c1', cost: 1, now: T0 })
    const admitted = { fw: 0, tb: 0 }
    for (let i = 0; i < 10; i++) {
      if ((await call(fw)).body[0]?.allowed) admitted.fw++
      if ((await call(tb)).body[0]?.allowed) admitted.tb++
    }
    expect(admitted).toEqual({ fw: 3, tb: 3 })
  })

  it("a deploy that changes a rule's parameters starts it fresh; an unchanged rule keeps its state", async () => {
    // Audit defect 2: the old bucket's fixed-point level, read in the new rate's units, denied ~10 s.
    const before = specOf([{ name: 'api', algorithm: tokenBucket({ capacity: 10, refillRate: 1 }) }])
    const after = specOf([{ name: 'api', algorithm: tokenBucket({ capacity: 100, refillRate: 500 }) }])
    const call = (rules: string) => rpc(worker, { object: 'deploy', rules, key: 'c1', cost: 1, now: T0 })
    for (let i = 0; i < 10; i++) await call(before)
    const d = (await call(after)).body[0]
    expect([d?.allowed, d?.remaining, d?.retryAfterMs]).toEqual([true, 99, 0])
    // The same rule again (another limiter, the same name and policy): its state as it was.
    const again = specOf([{ name: 'api', algorithm: tokenBucket({ capacity: 10, refillRate: 1 }) }])
    expect((await call(again)).body[0]?.allowed).toBe(false)
  })

  it('an alarm deletes expired state, by the object clock', async () => {
    const rules = specOf([{ name: 'second', algorithm: fixedWindow({ limit: 1, window: '1s' }) }])
    // The client clock stands still: only deleting the row can make the key fresh again.
    const call = () => rpc(worker, { binding: 'SWEEP', object: 'sweep', rules, key: 'k', cost: 1, now: T0 })
    expect((await call()).body[0]?.allowed).toBe(true)
    expect((await call()).body[0]?.allowed).toBe(false)
    // The row expires 1 s later by the object's clock; the alarm runs then (QuickSweep: ≥ 200 ms).
    let allowed = false
    for (let i = 0; i < 40 && !allowed; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      allowed = (await call()).body[0]?.allowed === true
    }
    expect(allowed).toBe(true)
  })

  it('an object whose rows are all swept keeps no storage, and counts afresh when called again', async () => {
    // Audit defect 4: every key ever seen left its object a table (an SQLite database each,
    // billed storage), peeks and resets included.
    const rules = specOf([{ name: 'second', algorithm: fixedWindow({ limit: 2, window: '1s' }) }])
    const call = (object: string, cost = 1, method = 'evaluate') =>
      rpc(worker, { binding: 'SWEEP', object, method, rules, key: 'k', cost, now: T0 })
    const storage = async (object: string) =>
      (await rpc(worker, { binding: 'SWEEP', object, method: 'storage', args: [] })).body as unknown as {
        names: string[]
        alarm: number | null
      }
    const emptied = async (object: string) => {
      for (let i = 0; i < 40; i++) {
        const s = await storage(object)
        if (s.names.length === 0 && s.alarm === null) return true
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      return false
    }
    const remaining = async (object: string) =>
      [(await call(object)).body[0], (await call(object)).body[0], (await call(object)).body[0]].map((v) =>
        v?.allowed ? v.remaining : 'denied',
      )

    expect(await remaining('emptied')).toEqual([1, 0, 'denied'])
    expect((await storage('emptied')).names).toContain('edgelimit_state')
    // The row expires 1 s later by the object's clock; the alarm deletes it and the storage.
    expect(await emptied('emptied')).toBe(true)
    // The client clock stands still: the key counts from nothing again, and is swept again.
    expect(await remaining('emptied')).toEqual([1, 0, 'denied'])
    expect(await storage('emptied')).toEqual({
      names: expect.arrayContaining(['edgelimit_state']),
      alarm: expect.any(Number),
    })
    expect(await emptied('emptied')).toBe(true)

    // A peek and a reset on a fresh object write nothing.
    const peek = await call('peeked', 0)
    expect([peek.body[0]?.allowed, peek.body[0]?.remaining]).toEqual([true, 2])
    expect((await call('peeked', 0, 'reset')).status).toBe(200)
    expect(await storage('peeked')).toEqual({ names: [], alarm: null })

    // A reset that leaves no row: the alarm still pending for the row empties the object.
    await call('reset')
    await call('reset', 0, 'reset')
    expect(await emptied('reset')).toBe(true)
  })

  it('a decision whose second row write throws charges no rule, and the object carries on', async () => {
    // The object wrote each charged rule's row by its own sql.exec: when a later one threw
    // (SQLITE_FULL, SQLITE_TOOBIG), the rows before it stayed written although the caller got an
    // error, and a two-rule limit charged one rule. Here the second row is over workerd's
    // limit of about 2 MB a row (SQLITE_TOOBIG): its rule's name (the rows' `rule` column) is 3 MB long.
    const first = { name: 'first', algorithm: fixedWindow({ limit: 2, window: '2s' }) }
    const good = specOf([first])
    const [firstSpec, secondSpec] = JSON.parse(
      specOf([first, { name: 'second', algorithm: fixedWindow({ limit: 5, window: '2s' }) }]),
    ) as [string, unknown][]
    const bad = JSON.stringify([firstSpec, ['x'.repeat(3_000_000), secondSpec?.[1]]])
    const call = (rules: string, cost = 1) =>
      rpc(worker, { binding: 'SWEEP', object: 'atomic', rules, key: 'k', cost, now: T0 })
    const peek = async () => (await call(good, 0)).body[0]?.remaining
    const storage = async () =>
      (await rpc(worker, { binding: 'SWEEP', object: 'atomic', method: 'storage', args: [] }))
        .body as unknown as { names: string[]; alarm: number | null }

    // On a fresh object: the failed write takes the table it created with it, and sets no alarm.
    const failed = await call(bad)
    expect([failed.status, failed.body.error]).toEqual([500, expect.stringMatching(/SQLITE_TOOBIG/)])
    expect(await peek()).toBe(2)
    expect(await storage()).toEqual({ names: [], alarm: null })

    // On an object with rows: the failed decision leaves the charge it found.
    expect((await call(good)).body[0]?.remaining).toBe(1)
    expect((await call(bad)).status).toBe(500)
    expect(await peek()).toBe(1)
    const after = [(await call(good)).body[0], (await call(good)).body[0]]
    expect(after.map((v) => [v?.allowed, v?.remaining])).toEqual([
      [true, 0],
      [false, 0],
    ])

    // The alarm set by the decisions that were written sweeps the rows and empties the object.
    let s = await storage()
    for (let i = 0; i < 60 && (s.names.length > 0 || s.alarm !== null); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      s = await storage()
    }
    expect(s).toEqual({ names: [], alarm: null })
    expect((await call(good)).body[0]?.remaining).toBe(1)
  })

  it('rejects a malformed request', async () => {
    const rules = specOf([{ name: 'x', algorithm: fixedWindow({ limit: 1, window: '1h' }) }])
    const res = await rpc(worker, { object: 'bad', rules, key: 'k', cost: -1 })
    expect(res.status).toBe(500)
    expect(res.body.error).toMatch(/non-negative integer cost/)
    // A caller's time that is not an integer of ms: refused, not turned into NaN state.
    for (const now of ['abc', 1.5, Number.MAX_SAFE_INTEGER * 2]) {
      const bad = await rpc(worker, { object: 'bad', rules, key: 'k', cost: 1, now })
      expect([bad.status, bad.body.error]).toEqual([500, expect.stringMatching(/integer cost and time/)])
    }
    expect((await rpc(worker, { object: 'bad', rules, key: 'k', cost: 1, now: T0 })).body[0]?.allowed).toBe(
      true,
    )
  })

  it('refuses, when the limiter is created, a sliding log too long for one stored row', async () => {
    const log = (limit: number, window = '1h') => ({ algorithm: 'sliding-log', options: { limit, window } })
    const configure = async (rules: unknown[]) =>
      (await worker.fetch('/configure', { method: 'POST', body: JSON.stringify(rules) })).json()
    // One entry per admitted instant, kept in one SQLite value (about 2 MB at most in workerd).
    expect(await configure([{ name: 'fine', algorithm: log(100_000, '1d') }])).toEqual({ issues: [] })
    expect(
      await configure([
        { name: 'minute', algorithm: log(10, '1m') },
        { name: 'hourly', algorithm: log(1_000_000) },
      ]),
    ).toEqual({
      code: 'ERR_EDGELIMIT_CONFIG',
      message: expect.any(String),
      issues: [
        {
          path: 'rules[1].algorithm.limit',
          code: 'ERR_INTEGER',
          message: 'expected a positive integer up to 100000, got 1000000 (number)',
        },
      ],
    })
    // A local rule is decided in the isolate: the object never holds it.
    expect(await configure([{ name: 'local', algorithm: log(1_000_000), consistency: 'local' }])).toEqual({
      issues: [],
    })
  })

  it('a sliding log at that bound fits: its longest state is written and read back', async () => {
    const rules = specOf([{ name: 'log', algorithm: slidingLog({ limit: 100_000, window: '1d' }) }])
    // The longest log the bound allows, at its largest as text: 99,999 entries 1 ms apart, each
    // cost 1 (fewer entries would each need a larger cost and fewer digits of time in all).
    const times = Array.from({ length: 99_999 }, (_, i) => T0 + i)
    const seeded = await rpc(worker, {
      binding: 'SEEDED',
      object: 'long',
      method: 'seed',
      // The row's rule as the object keys it: the name and the policy's fingerprint (encodeRules).
      args: ['k', (JSON.parse(rules) as [string][])[0]?.[0], times],
    })
    expect(seeded.body).toBeGreaterThan(1_500_000)
    const call = (now: number) =>
      rpc(worker, { binding: 'SEEDED', object: 'long', rules, key: 'k', cost: 1, now })
    const last = await call(T0 + 100_000)
    expect([last.status, last.body[0]?.allowed, last.body[0]?.remaining]).toEqual([200, true, 0])
    // Written: the 100,000th entry is there, and the log is full until the first leaves.
    const full = await call(T0 + 100_001)
    expect([full.body[0]?.allowed, full.body[0]?.retryAfterMs]).toEqual([false, 86_400_000 - 100_001])
  })

  it("the object's errors reach the limiter as ERR_EDGELIMIT_STORE, with their message and as its cause", async () => {
    // Over RPC an error keeps its message (its name in it) and loses its code: the store restores it.
    const body = await (await worker.fetch('/store-error')).json()
    // The error that came over RPC is kept as the store error's cause, its message the same.
    const named = expect.stringMatching(
      /runs no sliding-window rules: list its factory in durableObjectClass/,
    )
    const refused = {
      code: 'ERR_EDGELIMIT_STORE',
      message: named,
      cause: { name: expect.any(String), message: named },
    }
    expect(body).toEqual({
      reason: 'store-unavailable',
      // One store-error for the decision's call, one for the reset's (which also rejects).
      events: [
        { kind: 'error', ...refused },
        { kind: 'error', ...refused },
      ],
      reset: refused,
    })
  })

  it('withWaitUntil sends approximate counts to the object after each response', async () => {
    const key = `wu-${Date.now()}`
    for (let i = 0; i < 6; i++) {
      const res = await worker.fetch(`/approximate?key=${key}`)
      expect(((await res.json()) as { allowed: boolean }).allowed).toBe(true)
    }
    // The sync interval is an hour: only the after-response flush can have charged the object.
    let remaining = 0
    for (let i = 0; i < 50 && remaining !== 994; i++) {
      const res = await worker.fetch(`/approximate/peek?key=${key}`)
      remaining = ((await res.json()) as { remaining: number }).remaining
      if (remaining !== 994) await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(remaining).toBe(994)
  })
})

describe('durability', () => {
  it('state is in ctx.storage: a restarted runtime continues where it stopped', async () => {
    const rules = [
      { name: 'log', algorithm: slidingLog({ limit: 5, window: '1h' }) },
      { name: 'bucket', algorithm: tokenBucket({ capacity: 7, refillRate: 1, refillInterval: '10m' }) },
      { name: 'gcra', algorithm: gcra({ limit: 6, period: '1h' }) },
    ]
    const spec = specOf(rules)
    const steps = [0, 1000, 1000, 60_000, 60_000, 120_000, 900_000, 901_000].map((dt, i) => ({
      now: T0 + dt,
      cost: i % 3 === 2 ? 2 : 1,
    }))
    // What one uninterrupted memory store decides for the same calls.
    const bound = memoryStore().bind(createLimiter({ rules }).rules)
    const reference = []
    for (const { now, cost } of steps) reference.push(await bound.evaluate('k', cost, now))

    const dir = storageDir()
    try {
      const got = []
      for (const half of [steps.slice(0, 4), steps.slice(4)]) {
        // A new workerd process each time: nothing survives but the object's storage.
        const worker = await startWorker(entry, {
          durableObjects: { LIMITER: 'EdgelimitDurableObject' },
          persistTo: dir,
        })
        try {
          for (const { now, cost } of half)
            got.push((await rpc(worker, { object: 'durable', rules: spec, key: 'k', cost, now })).body)
        } finally {
          await worker.dispose()
        }
      }
      expect(got).toEqual(JSON.parse(JSON.stringify(reference)))
      expect(got.some((v) => v.some((r) => !r.allowed))).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a class without SQLite storage is refused with a clear error', async () => {
    const worker = await startWorker(entry, {
      durableObjects: { LIMITER: { className: 'EdgelimitDurableObject', useSQLite: false } },
    })
    try {
      const rules = specOf([{ name: 'x', algorithm: fixedWindow({ limit: 1, window: '1h' }) }])
      const res = await rpc(worker, { object: 'kv', rules, key: 'k', cost: 1 })
      expect(res.status).toBe(500)
      expect(res.body.error).toMatch(/needs a SQLite-backed class/)
    } finally {
      await worker.dispose()
    }
  })
})

describe('the built edgelimit/cloudflare entry', () => {
  it.skipIf(!existsSync(join(pkg, 'dist', 'cloudflare.js')))(
    'loads in workerd through the package exports, with the API snapshot-tested',
    async () => {
      const worker = await startWorker(join(import.meta.dirname, 'support', 'exports-worker.mjs'), {
        durableObjects: { LIMITER: 'EdgelimitDurableObject' },
      })
      try {
        expect(await (await worker.fetch('/')).json()).toMatchInlineSnapshot(`
          {
            "identity": {
              "header": "cf-connecting-ip",
              "trustPlatform": true,
            },
            "isClass": true,
            "names": [
              "EdgelimitDurableObject",
              "cloudflareIdentity",
              "cloudflarePeer",
              "durableObjectClass",
              "durableObjectStore",
              "withWaitUntil",
            ],
          }
        `)
      } finally {
        await worker.dispose()
      }
    },
  )
})
