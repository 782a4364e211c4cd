import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { fixedWindow, gcra, slidingLog, tokenBucket } from '../algorithms.js'
import { ConfigError } from '../errors.js'
import { createLimiter } from '../limiter.js'
import { manualClock, storeConformance } from '../testing/index.js'
import { type MemoryStore, type MemoryStoreOptions, memoryStore } from './memory.js'
import type { Store } from './types.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

describe('memory store conformance', () => {
  for (const c of storeConformance({ store: () => memoryStore() })) it(c.name, c.run)
})

describe('the conformance suite', () => {
  // A plausible custom store that never lets time go back: it decides at the latest time it saw.
  // It decides like the core while the clock only moves forward, and differently once it lags.
  const clamping = (): Store => {
    const inner = memoryStore()
    return {
      name: 'clamping',
      bind(rules) {
        const bound = inner.bind(rules)
        let latest = 0
        const at = (now: number) => {
          latest = Math.max(latest, now)
          return latest
        }
        return {
          evaluateSync: (key, cost, now, o) => bound.evaluateSync(key, cost, at(now), o),
          evaluate: (key, cost, now, o) => bound.evaluate(key, cost, at(now), o),
          reset: (key) => bound.reset(key),
        }
      },
    }
  }
  it('catches a store that decides a lagging clock otherwise than the core (ADR 0002)', async () => {
    const failed: string[] = []
    for (const c of storeConformance({ store: clamping })) await c.run().catch(() => failed.push(c.name))
    expect(failed.length).toBeGreaterThan(0)
    expect(
      failed.every((name) => name.endsWith("a clock stepping back gives the pure core's decisions")),
    ).toBe(true)
  })
})

describe('memory store', () => {
  it('rejects bad options with a ConfigError and a code, like createLimiter', () => {
    for (const bad of [{ maxKeys: 0 }, { maxKeys: 1.5 }, { maxKeys: 2 ** 31 }, null, 5]) {
      expect(() => memoryStore(bad as MemoryStoreOptions), JSON.stringify(bad)).toThrow(ConfigError)
    }
    expect(() => memoryStore({ maxKeys: 0 })).toThrow(
      expect.objectContaining({
        code: 'ERR_EDGELIMIT_CONFIG',
        issues: [expect.objectContaining({ path: 'maxKeys', code: 'ERR_INTEGER' })],
      }),
    )
    expect(() => memoryStore(null as unknown as MemoryStoreOptions)).toThrow(
      expect.objectContaining({ issues: [expect.objectContaining({ path: 'options', code: 'ERR_OBJECT' })] }),
    )
  })
  it('refuses an option name it does not know, as createLimiter does', () => {
    expect(() => memoryStore({ maxkeys: 10 } as MemoryStoreOptions)).toThrow(
      expect.objectContaining({
        issues: [
          {
            path: 'maxkeys',
            code: 'ERR_UNKNOWN_OPTION',
            message: 'expected one of maxKeys, got "maxkeys" (string)',
          },
        ],
      }),
    )
    expect(memoryStore({ maxKeys: undefined }).size).toBe(0)
  })
  it('evicts the least recently used key beyond maxKeys', () => {
    const clock = manualClock(0)
    const store = memoryStore({ maxKeys: 3 })
    const limiter = createLimiter({
      rules: [{ name: 'g', algorithm: gcra({ limit: 1, period: '1h' }) }],
      store,
      clock,
    })
    for (const k of ['a', 'b', 'c']) limiter.limitSync(k)
    limiter.limitSync('a') // a is now the most recent; b the least
    limiter.limitSync('d') // evicts b
    expect(limiter.limitSync('a').allowed).toBe(false)
    expect(limiter.limitSync('c').allowed).toBe(false)
    expect(limiter.limitSync('d').allowed).toBe(false)
    expect(limiter.limitSync('b').allowed).toBe(true) // evicted, so fresh again
  })

  it('checks expiry only at the least recently used end: a live LRU key is evicted before a newer expired one (as documented)', () => {
    const clock = manualClock(0)
    const store = memoryStore({ maxKeys: 2 })
    const limiter = createLimiter({
      rules: [{ name: 'tb', algorithm: tokenBucket({ capacity: 10, refillRate: 1 }) }],
      store,
      clock,
    })
    limiter.limitSync('a', { cost: 10 }) // full again (run out) at t = 10 s
    clock.set(1000)
    limiter.limitSync('b') // run out at t = 2 s
    clock.set(3000)
    limiter.limitSync('c') // a is the least recently used and live: evicted, though b has run out
    expect(limiter.limitSync('a', { cost: 0 }).remaining).toBe(10)
    limiter.limitSync('d') // b is now the least recently used and has run out: d takes its slot
    expect(limiter.limitSync('c', { cost: 0 }).remaining).toBe(9)
    expect(store.size).toBe(2)
  })

  it('reclaims expired keys before growing, with no timers', () => {
    const clock = manualClock(0)
    const store = memoryStore({ maxKeys: 100_000 })
    const limiter = createLimiter({
      rules: [{ name: 'fw', algorithm: fixedWindow({ limit: 5, window: '1s' }) }],
      store,
      clock,
    })
    // 50,000 keys, 100 per 1 s window: at most ~200 are live at any time.
    for (let i = 0; i < 50_000; i++) {
      clock.set(i * 10)
      limiter.limitSync(`k${i}`)
    }
    // Expired keys were reused instead of growing past the first table of 1,024 slots.
    expect(store.size).toBeLessThanOrEqual(1024)
    expect(store.size).toBeGreaterThan(100)
    // Live keys are never reclaimed early: the last window's keys are all still counted.
    for (let i = 49_900; i < 50_000; i++) expect(limiter.limitSync(`k${i}`, { cost: 0 }).remaining).toBe(4)
  })

  it('keeps at most maxKeys entries and a bounded heap for 2,000,000 distinct keys', () => {
    const store = memoryStore({ maxKeys: 100_000 })
    const clock = manualClock(0)
    const rules = [
      { name: 'tb', algorithm: tokenBucket({ capacity: 10, refillRate: 1, refillInterval: '1h' }) },
    ]
    const limiter = createLimiter({ rules, store, clock })
    const sizes: number[] = []
    const heaps: number[] = []
    for (let i = 0; i < 2_000_000; i++) {
      limiter.limitSync(`key-${i}`)
      if (i % 500_000 === 499_999) {
        sizes.push(store.size)
        // Live memory only: without a collection first, heapUsed also counts garbage not yet swept.
        gc()
        heaps.push(process.memoryUsage().heapUsed)
      }
    }
    expect(sizes).toEqual([100_000, 100_000, 100_000, 100_000])
    // Past the first 100,000 keys the heap stays flat: under 64 MB growth across 1.5M more keys.
    expect((heaps[3] as number) - (heaps[0] as number)).toBeLessThan(64 * 1024 * 1024)
  })

  it('frees the keys of limiters that are no longer used: size and heap stay bounded', async () => {
    const store = memoryStore({ maxKeys: 20_000 })
    const rules = [{ name: 'fw', algorithm: fixedWindow({ limit: 5, window: '1h' }) }]
    /** A limiter used for 20,000 keys, then dropped. */
    const useAndDrop = (s: MemoryStore) => {
      const limiter = createLimiter({ rules, store: s, clock: manualClock(0) })
      for (let k = 0; k < 20_000; k++) limiter.limitSync(`key-${k}`)
    }
    const sizes: number[] = []
    const heaps: number[] = []
    for (let i = 0; i < 30; i++) {
      useAndDrop(store)
      if (i % 10 !== 9) continue
      // A WeakRef's target lives until the job that read it ends: collect on a later task.
      await new Promise((resolve) => setImmediate(resolve))
      gc()
      sizes.push(store.size)
      heaps.push(process.memoryUsage().heapUsed)
    }
    // Held before: 200,000 → 400,000 → 600,000 keys, about 1.7 MB more per limiter.
    expect(sizes).toEqual([0, 0, 0])
    expect((heaps[2] as number) - (heaps[0] as number)).toBeLessThan(8 * 2 ** 20)
    // A limiter still in use keeps its keys.
    const limiter = createLimiter({ rules, store, clock: manualClock(0) })
    for (let k = 0; k < 100; k++) limiter.limitSync(`key-${k}`)
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    expect(store.size).toBe(100)
    expect(limiter.limitSync('key-0', { cost: 0 }).remaining).toBe(4)
  })

  it('a sliding log keeps only entries inside the window', () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [{ name: 'log', algorithm: slidingLog({ limit: 3, window: '1s' }) }],
      clock,
    })
    for (let t = 0; t < 100_000; t += 100) {
      clock.set(t)
      limiter.limitSync('k')
    }
    const d = limiter.limitSync('k')
    expect(d.allowed).toBe(false)
    // Admitted at 99,000, 99,100 and 99,200; the oldest leaves the window at 100,000.
    expect(d.retryAfterMs).toBe(100)
  })
})
