import { describe, expect, it, vi } from 'vitest'
import { compile } from '../core/index.js'
import type { Policy } from '../core/types.js'
import { memoryStore } from '../stores/memory.js'
import type { RuleVerdict, StoreRule } from '../stores/types.js'
import { createApproximate, type StoreAnswer } from './approximate.js'

const storeRule = (policy: Policy): StoreRule => ({ name: 'r', policy, compiled: compile(policy) })
/** The rule of the simulated stores below, whose verdicts are a fixed window's. */
const FIXED = storeRule({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 })
/** The clock of the tests whose calls all answer at time 0. */
const ZERO = { now: () => 0 }

const verdict: RuleVerdict = {
  allowed: true,
  remaining: 100,
  resetAfterMs: 60_000,
  retryAfterMs: 0,
  delayMs: 0,
  reason: undefined,
}

/** A counter with room for `maxKeys`, whose syncs are recorded (and answered by `answer`). */
function counter(maxKeys: number, answer: () => Promise<readonly RuleVerdict[]> = async () => [verdict]) {
  const synced: string[] = []
  const approximate = createApproximate(
    {
      sync: (key) => {
        synced.push(key)
        return answer()
      },
      rules: [FIXED],
      clock: ZERO,
      intervalMs: 60_000,
      timeoutMs: 45,
    },
    maxKeys,
  )
  const seed = (key: string) =>
    approximate.decide(key, 0, 0, 0, async () => ({ verdicts: [verdict], source: 'store' }))
  /** Whether the counter knows `key` (a probe whose strict call fails, so it seeds nothing). */
  const knows = async (key: string) => {
    let called = false
    const fallback = async (): Promise<StoreAnswer> => {
      called = true
      return { verdicts: [verdict], source: 'fallback' }
    }
    await approximate.decide(key, 0, 0, 0, fallback)
    return !called
  }
  const known = async (keys: string[]) => {
    const out: string[] = []
    for (const k of keys) if (await knows(k)) out.push(k)
    return out
  }
  return { approximate, seed, known, synced }
}

const names = (n: number) => Array.from({ length: n }, (_, i) => `k${i}`)

describe('approximate counter eviction', () => {
  it('keeps at most maxKeys keys, dropping the oldest quarter in one pass when full', async () => {
    const { seed, known } = counter(8)
    for (const k of names(8)) await seed(k)
    expect(await known(names(9))).toEqual(names(8))
    await seed('k8')
    expect(await known(names(9))).toEqual(names(9).slice(2))
    for (let i = 9; i < 200; i++) await seed(`k${i}`)
    const left = await known(names(200))
    expect(left.length).toBeLessThanOrEqual(8)
    expect(left.length).toBeGreaterThanOrEqual(7)
    expect(left).toEqual(names(200).slice(200 - left.length))
  })

  it('syncs a key with admissions not synced yet and keeps it, dropping the next oldest instead', async () => {
    const { approximate, seed, known, synced } = counter(8)
    for (const k of names(8)) await seed(k)
    // k0 admits 3 here, pending a sync an interval away.
    await approximate.decide('k0', 3, 1, 0, async () => {
      throw new Error('k0 is known: decided here')
    })
    await seed('k8')
    expect(synced).toEqual(['k0'])
    await approximate.flush(2)
    expect(await known(names(9))).toEqual(['k0', ...names(9).slice(3)])
  })

  it('with every key pending, stays over maxKeys and syncs each key once, then shrinks back', async () => {
    let release = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const { approximate, seed, known, synced } = counter(8, async () => {
      await held
      return [verdict]
    })
    for (const k of names(8)) await seed(k)
    for (const k of names(8)) await approximate.decide(k, 1, 1, 0, () => Promise.reject(new Error('known')))
    for (let i = 8; i < 12; i++) await seed(`k${i}`)
    // None of the first 8 could go (each was synced once, and stays while its sync is in flight):
    // the map stays over maxKeys until a batch of new keys came, then drops the free ones.
    expect(await known(names(12))).toEqual([...names(8), 'k11'])
    expect(synced.sort()).toEqual(names(8).sort())
    release()
    await approximate.flush(2)
    for (let i = 12; i < 20; i++) await seed(`k${i}`)
    const left = await known(names(20))
    expect(left.length).toBeLessThanOrEqual(8)
    expect(left).toEqual(names(20).slice(20 - left.length))
  })
})

/**
 * One fixed-window rule of `limit` in a simulated store: a call is decided (and charged) when it
 * is made, its reply held until `reply()` delivers the oldest one (as a store answers a request
 * that travelled in an earlier batch).
 */
function heldStore(limit: number) {
  const store = { used: 0, calls: 0 }
  const held: (() => void)[] = []
  const state = (allowed: boolean): RuleVerdict => ({
    allowed,
    remaining: limit - store.used,
    resetAfterMs: 60_000,
    retryAfterMs: allowed ? 0 : 60_000,
    delayMs: 0,
    reason: allowed ? undefined : 'limit-exceeded',
  })
  const call = (cost: number) => (): Promise<StoreAnswer> => {
    store.calls++
    const allowed = store.used + cost <= limit
    if (allowed) store.used += cost
    const answer: StoreAnswer = { verdicts: [state(allowed)], source: 'store' }
    return new Promise((resolve) => held.push(() => resolve(answer)))
  }
  const approximate = createApproximate({
    // A forced charge: the state before it when the rule would have denied it.
    sync: async (_key, cost) => {
      const allowed = store.used + cost <= limit
      const v = state(allowed)
      store.used += cost
      return [allowed ? state(true) : v]
    },
    rules: [FIXED],
    clock: ZERO,
    intervalMs: 60_000,
    timeoutMs: 45,
  })
  /** Delivers the oldest held reply (the newest with `newest`) and lets its caller go on. */
  const reply = async (newest = false) => {
    ;(newest ? held.pop() : held.shift())?.()
    await new Promise((resolve) => setImmediate(resolve))
  }
  const decide = (key: string) => approximate.decide(key, 1, 0, 0, call(1))
  return { store, held, approximate, decide, reply }
}

describe("approximate counter: a key's first requests", () => {
  it("later first requests wait for the first one's answer, which seeds the key once", async () => {
    const { store, held, approximate, decide, reply } = heldStore(10)
    const results: Promise<boolean>[] = []
    const admit = (key: string) => {
      const allowed = decide(key).then((d) => d.verdicts[0]?.allowed === true)
      results.push(allowed)
      return allowed
    }
    // Two first requests, the second in a later batch.
    admit('k')
    admit('k')
    // The first answer seeds the key (remaining 9); four more are admitted here, pending.
    await reply()
    for (let i = 0; i < 4; i++) await admit('k')
    // The second one's answer, had it gone to the store, comes now.
    while (held.length > 0) await reply()
    for (let i = 0; i < 20; i++) await admit('k')
    const admitted = (await Promise.all(results)).filter(Boolean).length
    await approximate.flush(1)
    expect([admitted, store.used]).toEqual([10, 10])
  })
  it('when the first call fails, the requests that waited for it fall back with no store call of their own', async () => {
    const { approximate } = counter(8)
    let fail = (_error: Error) => {}
    const failing = new Promise<StoreAnswer>((_resolve, reject) => {
      fail = reject
    })
    const calls: string[] = []
    const call = (name: string, answer: () => Promise<StoreAnswer>) => (failed?: boolean) => {
      calls.push(failed ? `${name} (fallback)` : name)
      return answer()
    }
    const first = approximate.decide(
      'k',
      1,
      0,
      0,
      call('first', () => failing),
    )
    const fallback = approximate.decide(
      'k',
      1,
      0,
      0,
      call('second', async () => ({ verdicts: [verdict], source: 'fallback' })),
    )
    const store = approximate.decide(
      'k',
      1,
      0,
      0,
      call('third', async () => ({ verdicts: [verdict], source: 'store' })),
    )
    expect(calls).toEqual(['first'])
    fail(new Error('down'))
    await expect(first).rejects.toThrow('down')
    await Promise.all([fallback, store])
    // Each from the rules' fallbacks (a call of its own would wait another deadline): they seed
    // nothing, the next first request does.
    expect(calls).toEqual(['first', 'second (fallback)', 'third (fallback)'])
    const next = await approximate.decide(
      'k',
      1,
      0,
      0,
      call('fourth', async () => ({ verdicts: [verdict], source: 'store' })),
    )
    expect(next.source).toBe('store')
    expect(
      (
        await approximate.decide(
          'k',
          1,
          0,
          0,
          call('fifth', () => failing),
        )
      ).source,
    ).toBe('approximate')
    expect(calls).toEqual(['first', 'second (fallback)', 'third (fallback)', 'fourth'])
  })
  it('reset(key) while its first call is in flight: that answer (the state before the reset) seeds nothing', async () => {
    const { store, held, approximate, decide, reply } = heldStore(5)
    store.used = 5
    const first = decide('k')
    approximate.reset('k')
    store.used = 0
    await reply()
    expect((await first).verdicts[0]?.allowed).toBe(false)
    const allowed: boolean[] = []
    for (let i = 0; i < 6; i++) {
      const d = decide('k')
      while (held.length > 0) await reply()
      allowed.push((await d).verdicts[0]?.allowed === true)
    }
    expect(allowed).toEqual([true, true, true, true, true, false])
  })

  it('a first call after the reset seeds the key; the one from before it, answering later, does not', async () => {
    const { store, approximate, decide, reply } = heldStore(5)
    store.used = 5
    const before = decide('k')
    approximate.reset('k')
    store.used = 0
    const after = decide('k')
    // The call from after the reset answers first (remaining 4), then the one from before it.
    await reply(true)
    await reply(true)
    expect([(await before).verdicts[0]?.allowed, (await after).verdicts[0]?.allowed]).toEqual([false, true])
    const allowed: boolean[] = []
    for (let i = 0; i < 5; i++) allowed.push((await decide('k')).verdicts[0]?.allowed === true)
    expect(allowed).toEqual([true, true, true, true, false])
  })
})

/**
 * A counter on a simulated store of `limit` (one fixed-window rule, interval 100 ms) whose syncs
 * are charged when made and answered by `settle`: with the verdicts (`answer`), as not sent
 * (`refuse`: the breaker was open, nothing charged) or with an error (`fail`).
 */
function syncStore(limit: number) {
  const store = { used: 0 }
  const syncs: { cost: number; answer(): void; refuse(): void; fail(): void }[] = []
  const state = (): RuleVerdict => ({ ...verdict, remaining: limit - store.used })
  const approximate = createApproximate({
    sync: (_key, cost) =>
      new Promise((resolve, reject) => {
        store.used += cost
        const verdicts = [state()]
        syncs.push({
          cost,
          answer: () => resolve(verdicts),
          refuse: () => {
            store.used -= cost
            resolve(undefined)
          },
          fail: () => reject(new Error('connection reset')),
        })
      }),
    rules: [FIXED],
    clock: ZERO,
    intervalMs: 100,
    timeoutMs: 45,
  })
  const turn = () => new Promise((resolve) => setImmediate(resolve))
  /** `n` admissions of cost 1 at `now`; how many were admitted. */
  const admit = async (n: number, now: number) => {
    let admitted = 0
    for (let i = 0; i < n; i++) {
      const d = await approximate.decide('k', 1, now, 0, async () => {
        store.used++
        return { verdicts: [state()], source: 'store' }
      })
      if (d.verdicts[0]?.allowed) admitted++
    }
    return admitted
  }
  const remaining = async (now: number) =>
    (await approximate.decide('k', 0, now, 0, async () => ({ verdicts: [], source: 'fallback' }))).verdicts[0]
      ?.remaining
  /** Flushes, the store answering the last sync (the flush's own) at once. */
  const flush = async (now: number) => {
    const done = approximate.flush(now)
    syncs.at(-1)?.answer()
    await done
  }
  return { store, syncs, approximate, admit, remaining, turn, flush }
}

describe('approximate counter: how a sync ends', () => {
  it('a sync answered late (past the deadline) holds the next one and is applied when it comes', async () => {
    const { store, syncs, approximate, admit, remaining, turn, flush } = syncStore(100)
    await admit(5, 0)
    // Due: the sync of 4 goes; the store answers only after the next one is due.
    await admit(3, 100)
    await admit(3, 250)
    expect(syncs.map((s) => s.cost)).toEqual([4])
    syncs[0]?.answer()
    await turn()
    // The store's 95 less the 6 admitted here since it started (its own 4 are in the 95).
    expect(await remaining(250)).toBe(89)
    await admit(1, 260)
    expect(syncs.map((s) => s.cost)).toEqual([4, 6])
    syncs[1]?.answer()
    await flush(260)
    expect([store.used, approximate.dropped]).toEqual([12, 0])
  })

  it('a sync that fails is dropped, not sent again; one not sent goes with the next sync', async () => {
    const { store, syncs, approximate, admit, turn, flush } = syncStore(100)
    await admit(5, 0)
    await admit(1, 100)
    // The store failed after the sync was sent: it may have counted the 4 (here it did).
    syncs[0]?.fail()
    await turn()
    await admit(1, 200)
    expect(syncs.map((s) => s.cost)).toEqual([4, 1])
    expect(approximate.dropped).toBe(4)
    // Not sent (the breaker is open): the 1 stays pending and goes with the next sync.
    syncs[1]?.refuse()
    await turn()
    await admit(1, 300)
    expect(syncs.map((s) => s.cost)).toEqual([4, 1, 2])
    syncs[2]?.answer()
    await flush(300)
    expect([store.used, approximate.dropped]).toEqual([8, 4])
  })

  it('a sync unanswered for 4 intervals no longer holds the next, and its late answer does not undo a newer one', async () => {
    const { store, syncs, admit, remaining, turn } = syncStore(100)
    await admit(5, 0)
    await admit(1, 100)
    await admit(1, 499)
    expect(syncs.map((s) => s.cost)).toEqual([4])
    // 400 ms (4 intervals) after the first one started: the next sync goes, with what came since.
    await admit(1, 500)
    expect(syncs.map((s) => s.cost)).toEqual([4, 2])
    syncs[1]?.answer()
    await turn()
    // 93 in the store, less the 1 admitted since. The 4 given up are no longer taken off: the
    // store's answer holds them when it counted them (here it did).
    expect(await remaining(500)).toBe(92)
    // The first sync's answer (remaining 95) comes last, and changes nothing.
    syncs[0]?.answer()
    await turn()
    expect(await remaining(500)).toBe(92)
    expect(store.used).toBe(7)
  })

  it('a given-up sync answered before the next one: its answer applies, its batch is taken off once', async () => {
    const { store, syncs, admit, remaining, turn, flush } = syncStore(100)
    await admit(5, 0)
    await admit(1, 100)
    await admit(1, 499)
    await admit(1, 500)
    expect(syncs.map((s) => s.cost)).toEqual([4, 2])
    // The given-up sync's answer comes first: the store's 95 (its own 4 in it), less the 1
    // admitted since and the 2 of the sync in flight.
    syncs[0]?.answer()
    await turn()
    expect(await remaining(500)).toBe(92)
    syncs[1]?.answer()
    await turn()
    expect(await remaining(500)).toBe(92)
    await admit(2, 550)
    await flush(550)
    expect([await remaining(550), store.used]).toEqual([90, 10])
  })

  it('replies lost after the store counted them lower no later window: each window admits the limit', async () => {
    // One fixed window of 100 per second, syncs every 100 ms; in windows 1 to 3 a sync's reply is
    // lost (a client with no timeout of its own): the store counted its batch, no answer comes.
    const limit = 100
    const used = new Map<number, number>()
    let lose = false
    const charge = (cost: number, now: number, strict: boolean): RuleVerdict => {
      const w = Math.floor(now / 1000)
      const before = used.get(w) ?? 0
      const allowed = before + cost <= limit
      if (allowed || !strict) used.set(w, before + cost)
      return {
        ...verdict,
        allowed,
        remaining: limit - (allowed ? before + cost : before),
        resetAfterMs: (w + 1) * 1000 - now,
      }
    }
    let at = 0
    const approximate = createApproximate({
      sync: (_key, cost, now) => {
        const verdicts = [charge(cost, now, false)]
        if (lose) {
          lose = false
          return new Promise(() => {})
        }
        return Promise.resolve(verdicts)
      },
      rules: [FIXED],
      clock: { now: () => at },
      intervalMs: 100,
      timeoutMs: 45,
    })
    const turn = () => new Promise((resolve) => setImmediate(resolve))
    const admitted: number[] = []
    for (let w = 0; w < 6; w++) {
      let n = 0
      for (let t = 0; t < 1000; t += 5) {
        const now = w * 1000 + t
        at = now
        if (t === 200 && w >= 1 && w <= 3) lose = true
        const d = await approximate.decide('k', 1, now, 0, async () => ({
          verdicts: [charge(1, now, true)],
          source: 'store',
        }))
        if (d.verdicts[0]?.allowed) n++
        await turn()
      }
      admitted.push(n)
    }
    expect(admitted.slice(4)).toEqual([100, 100])
    expect(admitted.every((n, w) => n === used.get(w))).toBe(true)
  })

  it('flush waits for an unanswered sync no longer than the deadline, and rejects', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const { syncs, approximate, admit } = syncStore(100)
      await admit(5, 0)
      let done: unknown
      const flushed = approximate.flush(0).catch((error: unknown) => (done = error))
      await vi.advanceTimersByTimeAsync(44)
      expect(done).toBeUndefined()
      await vi.advanceTimersByTimeAsync(1)
      await flushed
      expect(done).toMatchObject({ code: 'ERR_EDGELIMIT_STORE' })
      // Answered later: nothing is sent again.
      syncs[0]?.answer()
      await approximate.flush(0)
      expect(syncs.map((s) => s.cost)).toEqual([4])
    } finally {
      vi.useRealTimers()
    }
  })

  it('without a deadline, flush waits for an unanswered sync no longer than 4 intervals, and rejects', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const approximate = createApproximate({
        // A reply lost by a client with no timeout of its own: the sync never settles.
        sync: () => new Promise(() => {}),
        rules: [FIXED],
        clock: ZERO,
        intervalMs: 100,
        timeoutMs: undefined,
      })
      await approximate.decide('k', 1, 0, 0, async () => ({ verdicts: [verdict], source: 'store' }))
      await approximate.decide('k', 1, 0, 0, () => Promise.reject(new Error('known')))
      let done: unknown
      const flushed = approximate.flush(0).catch((error: unknown) => (done = error))
      await vi.advanceTimersByTimeAsync(399)
      expect(done).toBeUndefined()
      await vi.advanceTimersByTimeAsync(1)
      await flushed
      expect(done).toMatchObject({ code: 'ERR_EDGELIMIT_STORE' })
    } finally {
      vi.useRealTimers()
    }
  })
})

/**
 * `processes` counters on one memory store (syncing every 100 ms), and a strict limiter on
 * another, each process sending one request every `everyMs` (staggered) for `seconds`: admissions
 * per second in each mode, and the counters' syncs.
 */
async function againstStrict(policy: Policy, processes: number, everyMs: number, seconds: number) {
  const rule = storeRule(policy)
  const shared = memoryStore().bind([rule])
  const strict = memoryStore().bind([rule])
  let at = 0
  const counters = Array.from({ length: processes }, () =>
    createApproximate({
      sync: (key, cost, now) => shared.evaluate(key, cost, now, { force: true }),
      rules: [rule],
      clock: { now: () => at },
      intervalMs: 100,
      timeoutMs: 45,
    }),
  )
  const perSecond = {
    approximate: new Array<number>(seconds).fill(0),
    strict: new Array<number>(seconds).fill(0),
  }
  const turn = () => new Promise((resolve) => setImmediate(resolve))
  for (let t = 0; t < seconds * 1000; t += everyMs) {
    for (const [p, counter] of counters.entries()) {
      const now = t + p
      at = now
      const s = Math.floor(now / 1000)
      const d = await counter.decide('k', 1, now, 0, async () => ({
        verdicts: await shared.evaluate('k', 1, now),
        source: 'store',
      }))
      const count = (per: number[], allowed = false) => {
        if (allowed) per[s] = (per[s] ?? 0) + 1
      }
      count(perSecond.approximate, d.verdicts[0]?.allowed)
      count(perSecond.strict, (await strict.evaluate('k', 1, now))[0]?.allowed)
    }
    await turn()
  }
  return { perSecond, syncs: counters.map((c) => c.syncs) }
}

const total = (xs: number[]) => xs.reduce((a, b) => a + b, 0)

describe('approximate counter: a key whose quota is spent', () => {
  it.each<[string, Policy, number]>([
    [
      'token bucket',
      { algorithm: 'token-bucket', capacity: 100, refillRate: 20, refillIntervalMs: 1000 },
      20,
    ],
    ['GCRA', { algorithm: 'gcra', limit: 20, periodMs: 1000, burst: 100 }, 20],
    [
      'leaky bucket',
      { algorithm: 'leaky-bucket', mode: 'police', capacity: 100, leakRate: 20, leakIntervalMs: 1000 },
      20,
    ],
  ])(
    '%s: admits again at the refill rate, as strict does, not only once full again',
    async (_name, policy, rate) => {
      const { perSecond, syncs } = await againstStrict(policy, 3, 20, 10)
      // 3 × 50 requests/s against a refill of 20/s: after the first burst, each second admits the
      // refill (approximate: the first second's over-admission is paid back in the next one).
      expect(perSecond.strict.slice(1)).toEqual(new Array(9).fill(rate))
      expect(total(perSecond.approximate)).toBeGreaterThanOrEqual(total(perSecond.strict))
      expect(total(perSecond.approximate)).toBeLessThanOrEqual(total(perSecond.strict) + 10)
      for (const n of perSecond.approximate.slice(2)) {
        expect(n).toBeGreaterThanOrEqual(rate - 2)
        expect(n).toBeLessThanOrEqual(rate + 2)
      }
      // No more than a sync per interval per process, with every request denied here in between.
      for (const n of syncs) expect(n).toBeLessThanOrEqual(100)
    },
  )

  it('a sliding window admits again as the previous window ages out, as strict does', async () => {
    const policy: Policy = { algorithm: 'sliding-window', limit: 300, windowMs: 2000 }
    const { perSecond } = await againstStrict(policy, 3, 5, 8)
    // Strict: 150/s once in steady state; approximate as many, over-admitting within the bound.
    expect(total(perSecond.approximate)).toBeGreaterThanOrEqual(total(perSecond.strict))
    for (const n of perSecond.approximate.slice(2)) expect(n).toBeGreaterThan(100)
  })

  it('one process on a slow bucket: no store call until a token has refilled, then one per token', async () => {
    const policy: Policy = {
      algorithm: 'token-bucket',
      capacity: 1000,
      refillRate: 1,
      refillIntervalMs: 1000,
    }
    const { perSecond, syncs } = await againstStrict(policy, 1, 1, 10)
    expect(perSecond.strict.slice(1)).toEqual(new Array(9).fill(1))
    expect(perSecond.approximate).toEqual(perSecond.strict)
    // The first second's 10 syncs, then about one per token (a cost-0 sync as it refills, another
    // to charge it), where a sync every interval would be 100.
    expect(syncs[0]).toBeLessThanOrEqual(10 + 2 * 9 + 2)
  })

  it('a fixed window syncs nothing while spent, until it ends', async () => {
    const policy: Policy = { algorithm: 'fixed-window', limit: 100, windowMs: 1000 }
    const { perSecond, syncs } = await againstStrict(policy, 1, 1, 5)
    expect(perSecond.approximate).toEqual(new Array(5).fill(100))
    // Per window: the syncs while it admits (its 100 requests take 100 ms), then none.
    expect(syncs[0]).toBeLessThanOrEqual(5 * 3)
  })

  it('a fixed window: a batch admitted in one window and synced after it ends is not charged to the next', async () => {
    // 3 × 100 requests/s against 300 per second: admissions go on to each window's end, and the
    // last batches reach the store after it (they took 9 of the next window's 300 before).
    const policy: Policy = { algorithm: 'fixed-window', limit: 300, windowMs: 1000 }
    const { perSecond } = await againstStrict(policy, 3, 10, 5)
    expect(perSecond.approximate).toEqual(perSecond.strict)
  })
})
