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
