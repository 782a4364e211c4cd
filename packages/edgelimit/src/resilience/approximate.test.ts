import { describe, expect, it } from 'vitest'
import type { RuleVerdict } from '../stores/types.js'
import { createApproximate, type StoreAnswer } from './approximate.js'

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
      rules: 1,
      intervalMs: 60_000,
      timed: true,
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
    rules: 1,
    intervalMs: 60_000,
    timed: true,
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
