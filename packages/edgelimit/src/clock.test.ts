import { describe, expect, it } from 'vitest'
import { fixedWindow, tokenBucket } from './algorithms.js'
import { type CoarseClockOptions, coarseClock } from './clock.js'
import { ConfigError } from './errors.js'
import { createLimiter } from './limiter.js'

/** A source driven by a virtual time in fractional ms; it returns whole ms, counting its reads. */
function virtualSource(start = 1_000_000) {
  const s = {
    at: start,
    /** When the source was last read (the reading a cached time comes from). */
    readAt: Number.NaN,
    reads: 0,
    read: () => {
      s.reads++
      s.readAt = s.at
      return Math.floor(s.at)
    },
  }
  return s
}

/** The next task: every microtask queued before it has run. */
const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('coarseClock', () => {
  it('at a steady pace, serves readings less than 1 ms old, and reads the source far less', () => {
    for (const msPerRead of [0.0005, 0.003, 0.01, 0.1, 0.3, 0.7, 2, 15]) {
      const src = virtualSource()
      const clock = coarseClock({ source: src.read })
      let last = 0
      let maxLag = 0
      const wrong: string[] = []
      const n = 200_000
      for (let i = 0; i < n; i++) {
        src.at += msPerRead
        const t = clock.now()
        // A time the source returned, never ahead of it nor going back, from a reading < 1 ms old.
        if (t !== Math.floor(src.readAt) || t > Math.floor(src.at) || t < last) wrong.push(`read ${i}: ${t}`)
        maxLag = Math.max(maxLag, src.at - src.readAt)
        last = t
      }
      expect(wrong, `${msPerRead} ms per read`).toEqual([])
      expect(maxLag, `${msPerRead} ms per read`).toBeLessThan(1)
      // Fast reads share readings (up to 32 per reading); reads ≥ 0.5 ms apart are never cached.
      if (msPerRead <= 0.003) expect(src.reads).toBeLessThan(n / 20)
      if (msPerRead >= 0.5) expect(src.reads).toBe(n)
    }
  })

  it('serves at most `reads` reads per reading', () => {
    const src = virtualSource()
    const clock = coarseClock({ source: src.read, reads: 4 })
    for (let i = 0; i < 100_000; i++) {
      src.at += 0.0001
      clock.now()
    }
    expect(src.reads).toBeGreaterThanOrEqual(100_000 / 4)
    const exact = coarseClock({ source: src.read, reads: 1 })
    const before = src.reads
    for (let i = 0; i < 1000; i++) exact.now()
    expect(src.reads - before).toBe(1000)
  })

  it('drops its reading when the microtask queue drains: a new task reads the source', async () => {
    const src = virtualSource()
    const clock = coarseClock({ source: src.read })
    // Learn a fast pace, so that readings are shared.
    for (let i = 0; i < 10_000; i++) {
      src.at += 0.001
      clock.now()
    }
    const t = clock.now()
    const reads = src.reads
    expect(clock.now()).toBe(t)
    expect(src.reads).toBe(reads) // served from the reading
    // An idle gap: the event loop ran other tasks for 10 s.
    await nextTask()
    src.at += 10_000
    expect(clock.now()).toBe(Math.floor(src.at))
    expect(src.reads).toBe(reads + 1)
  })

  it('keeps its reading across a loop of awaited decisions, and re-reads at the loop end', async () => {
    const src = virtualSource()
    const clock = coarseClock({ source: src.read })
    for (let i = 0; i < 20_000; i++) {
      src.at += 0.001
      clock.now()
      await Promise.resolve()
    }
    expect(src.reads).toBeLessThan(20_000 / 4)
    const reads = src.reads
    await nextTask()
    clock.now()
    expect(src.reads).toBe(reads + 1)
  })

  it('a source that steps back is followed at once, and nothing is cached until the pace is known', () => {
    let now = 5000
    const clock = coarseClock({ source: () => now })
    expect(clock.now()).toBe(5000)
    now = 4000
    expect(clock.now()).toBe(4000)
    now = 4001
    expect(clock.now()).toBe(4001)
  })

  it('each decision is the exact decision at the time the clock returned', () => {
    const src = virtualSource(0)
    const seen: number[] = []
    const clock = coarseClock({ source: src.read })
    const rules = [
      { name: 'b', algorithm: tokenBucket({ capacity: 50, refillRate: 7 }) },
      { name: 'w', algorithm: fixedWindow({ limit: 300, window: '1s' }) },
    ]
    const coarse = createLimiter({ rules, clock: { now: () => seen[seen.push(clock.now()) - 1] as number } })
    const replay = createLimiter({ rules, clock: { now: () => seen.shift() as number } })
    for (let i = 0; i < 20_000; i++) {
      src.at += 0.37
      const key = `k${i % 3}`
      const d = coarse.limitSync(key)
      expect(replay.limitSync(key)).toEqual(d)
    }
  })

  it('rejects bad options with a code', () => {
    expect(() => coarseClock({ reads: 0 })).toThrow(ConfigError)
    expect(() => coarseClock({ reads: 1.5 })).toThrow(
      expect.objectContaining({ code: 'ERR_EDGELIMIT_CONFIG' }),
    )
    expect(() => coarseClock({ source: 5 as unknown as () => number })).toThrow(ConfigError)
    expect(() => coarseClock(null as unknown as CoarseClockOptions)).toThrow(
      expect.objectContaining({
        code: 'ERR_EDGELIMIT_CONFIG',
        issues: [expect.objectContaining({ path: 'options', code: 'ERR_OBJECT' })],
      }),
    )
    // A misspelt name is not ignored (its default would stay).
    expect(() => coarseClock({ read: 8 } as unknown as CoarseClockOptions)).toThrow(
      expect.objectContaining({
        issues: [expect.objectContaining({ path: 'read', code: 'ERR_UNKNOWN_OPTION' })],
      }),
    )
    // Every problem at once.
    expect(() => coarseClock({ source: 5 as unknown as () => number, reads: 0 })).toThrow(
      expect.objectContaining({
        issues: [expect.objectContaining({ path: 'source' }), expect.objectContaining({ path: 'reads' })],
      }),
    )
  })
})
