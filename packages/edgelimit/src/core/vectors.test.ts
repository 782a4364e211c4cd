import { describe, expect, it } from 'vitest'
import { createLimiter, fixedWindow, leakyBucket, slidingLog, slidingWindow, tokenBucket } from '../index.js'
import { manualClock } from '../testing/index.js'
import { compile } from './index.js'
import { newVerdict } from './types.js'

// REFERENCE.md §3, one test per vector.
describe('REFERENCE §3 vectors', () => {
  it('1: fixed window admits 200 across a boundary; the sliding log at most 100 per span', async () => {
    const w = 60_000
    const times: number[] = []
    for (let i = 0; i < 100; i++) times.push(w - 1000 + i * 10) // last second of window 0
    for (let i = 0; i < 100; i++) times.push(w + i * 10) // first second of window 1
    times.push(w + 1500)
    const run = async (algorithm: ReturnType<typeof fixedWindow>) => {
      const clock = manualClock(0)
      const limiter = createLimiter({ rules: [{ name: 'r', algorithm }], clock })
      const admitted: number[] = []
      for (const t of times) {
        clock.set(t)
        if ((await limiter.limit('k')).allowed) admitted.push(t)
      }
      return admitted
    }
    const maxInSpan = (xs: number[]) => {
      let best = 0
      for (let i = 0, j = 0; i < xs.length; i++) {
        while ((xs[i] as number) - (xs[j] as number) >= w) j++
        best = Math.max(best, i - j + 1)
      }
      return best
    }
    const fixed = await run(fixedWindow({ limit: 100, window: w }))
    expect(fixed.length).toBe(200)
    expect(maxInSpan(fixed)).toBe(200)
    const log = await run(slidingLog({ limit: 100, window: w }))
    expect(maxInSpan(log)).toBe(100)
    const counter = await run(slidingWindow({ limit: 100, window: w }))
    // Flooring the weighted previous window lets a few through as it decays: 100 + 3 (at
    // 60,010, 60,610 and 61,500 ms), against the fixed window's 200.
    expect(maxInSpan(counter)).toBe(103)
  })

  it('2: sliding counter prev=50, cur=30, 40 % in → estimate 60, allowed, 39 remaining', () => {
    const rule = compile({ algorithm: 'sliding-window', limit: 100, windowMs: 60_000 })
    if (rule.kind !== 'numeric') throw new Error('numeric')
    const k = 1000
    const out = newVerdict()
    rule.decide([k, 30, 50], 0, k * 60_000 + 24_000, 1, out)
    expect(out.allowed).toBe(true)
    expect(out.remaining).toBe(39)
    expect(out.next).toEqual([k, 31, 50])
  })

  it('3: token bucket C=10, r=2/s', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [{ name: 'tb', algorithm: tokenBucket({ capacity: 10, refillRate: 2 }) }],
      clock,
    })
    for (let i = 0; i < 10; i++) expect((await limiter.limit('k')).allowed).toBe(true)
    const eleventh = await limiter.limit('k')
    expect([eleventh.allowed, eleventh.retryAfterMs]).toEqual([false, 500])
    clock.set(1000)
    expect((await limiter.limit('k')).allowed).toBe(true)
    expect((await limiter.limit('k')).allowed).toBe(true)
    const third = await limiter.limit('k')
    expect([third.allowed, third.retryAfterMs]).toEqual([false, 500])
    clock.set(5000)
    const at5 = await limiter.peek('k')
    expect(at5.remaining).toBe(8)
    expect(at5.resetAfterMs).toBe(1000)
    clock.set(6000)
    expect((await limiter.peek('k')).remaining).toBe(10)
  })

  it('4: token bucket C=50, r=10/s bursts 50 then sustains 10/s, never above 600/min + 50', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [{ name: 'tb', algorithm: tokenBucket({ capacity: 50, refillRate: 10 }) }],
      clock,
    })
    let admitted = 0
    // A greedy client asking every 10 ms for one minute.
    for (let t = 0; t < 60_000; t += 10) {
      clock.set(t)
      if ((await limiter.limit('k')).allowed) admitted++
    }
    // 50 at t=0, then exactly 10/s for the rest of the minute (refill at t = 100, 200, … 59,900).
    expect(admitted).toBe(50 + 599)
    expect(admitted).toBeLessThanOrEqual(600 + 50)
  })

  it('5: hybrid burst bucket in front of a 100/min sliding window is all-or-nothing', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [
        { name: 'burst', algorithm: tokenBucket({ capacity: 20, refillRate: 10 }) },
        { name: 'sustained', algorithm: slidingWindow({ limit: 100, window: '60s' }) },
      ],
      clock,
    })
    let admitted = 0
    for (let i = 0; i < 30; i++) if ((await limiter.limit('k')).allowed) admitted++
    expect(admitted).toBe(20)
    // The window was charged only for the 20 admitted requests.
    const d = await limiter.peek('k')
    expect(d.rules.map((r) => [r.name, r.remaining])).toEqual([
      ['burst', 0],
      ['sustained', 80],
    ])
    // Over the minute the window caps the bucket's 10/s at 100 in all.
    for (let t = 100; t < 60_000; t += 100) {
      clock.set(t)
      if ((await limiter.limit('k')).allowed) admitted++
    }
    expect(admitted).toBe(100)
    const denied = await limiter.limit('k')
    expect(denied.rules.map((r) => r.allowed)).toEqual([true, false])
    expect(denied.reason).toBe('limit-exceeded')
  })

  it('6: leaky shape r=1/s, Q=2 delays 0, 1000, 2000 then denies with retry 1000', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [{ name: 'shape', algorithm: leakyBucket({ capacity: 2, leakRate: 1, mode: 'shape' }) }],
      clock,
    })
    const ds = []
    for (let i = 0; i < 4; i++) ds.push(await limiter.limit('k'))
    expect(ds.map((d) => [d.allowed, d.delayMs ?? null])).toEqual([
      [true, 0],
      [true, 1000],
      [true, 2000],
      [false, null],
    ])
    expect(ds[3]?.retryAfterMs).toBe(1000)
  })
})
