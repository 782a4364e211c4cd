import { describe, expect, it } from 'vitest'
import { compile } from './index.js'
import type { Policy } from './types.js'
import { newVerdict } from './types.js'

/** Runs `(time, cost)` requests through a policy, carrying state like a store does. */
function run(policy: Policy, requests: readonly (readonly [number, number])[]) {
  const rule = compile(policy)
  if (rule.kind !== 'numeric') throw new Error('numeric rules only')
  const row = new Array<number>(rule.width).fill(0)
  const out = newVerdict()
  return requests.map(([now, cost]) => {
    rule.decide(row, 0, now, cost, out)
    if (out.allowed && cost > 0) for (let i = 0; i < rule.width; i++) row[i] = out.next[i] as number
    return {
      allowed: out.allowed,
      remaining: out.remaining,
      retry: out.retryAfterMs,
      reset: out.resetAfterMs,
      ...(out.delayMs > 0 ? { delay: out.delayMs } : {}),
    }
  })
}

describe('fixed window', () => {
  const p: Policy = { algorithm: 'fixed-window', limit: 3, windowMs: 1000 }
  it.each([
    [
      'fills and denies until the aligned window ends',
      [
        [100, 1],
        [200, 2],
        [300, 1],
        [999, 1],
        [1000, 1],
      ],
      [
        { allowed: true, remaining: 2, retry: 0, reset: 900 },
        { allowed: true, remaining: 0, retry: 0, reset: 800 },
        { allowed: false, remaining: 0, retry: 700, reset: 700 },
        { allowed: false, remaining: 0, retry: 1, reset: 1 },
        { allowed: true, remaining: 2, retry: 0, reset: 1000 },
      ],
    ],
    [
      // ADR 0002: a lagging clock is conservative. Window 0 does not reopen with a zero count.
      'a clock stepping back across a boundary stays in the newer window',
      [
        [1000, 2],
        [999, 1],
        [999, 1],
        [1000, 1],
      ],
      [
        { allowed: true, remaining: 1, retry: 0, reset: 1000 },
        { allowed: true, remaining: 0, retry: 0, reset: 1001 },
        { allowed: false, remaining: 0, retry: 1001, reset: 1001 },
        { allowed: false, remaining: 0, retry: 1000, reset: 1000 },
      ],
    ],
    [
      'a cost above the limit never passes',
      [
        [0, 4],
        [0, 0],
      ],
      [
        { allowed: false, remaining: 3, retry: Number.POSITIVE_INFINITY, reset: 0 },
        { allowed: true, remaining: 3, retry: 0, reset: 0 },
      ],
    ],
  ] as const)('%s', (_name, requests, expected) => {
    expect(run(p, requests)).toEqual(expected)
  })
})

describe('sliding-window counter', () => {
  const p: Policy = { algorithm: 'sliding-window', limit: 10, windowMs: 1000 }
  it('weights the previous window by its overlap and retries exactly', () => {
    const r = run(p, [
      [0, 10], // window 0 full; as "previous" it weighs 0 once 10·(1000−e) < 1000: e = 901
      [1000, 1], // estimate floor(10·1000/1000) = 10 → denied; weighted ≤ 9 from e = 1
      [1101, 1], // estimate floor(10·899/1000) = 8 → allowed, 9 counted
      [1101, 2], // 9 + 2 > 10 → denied; weighted ≤ 7 needs 10·(1000−e) < 8000: e = 201
    ])
    expect(r).toEqual([
      { allowed: true, remaining: 0, retry: 0, reset: 1901 },
      { allowed: false, remaining: 0, retry: 1, reset: 901 },
      { allowed: true, remaining: 1, retry: 0, reset: 900 },
      { allowed: false, remaining: 1, retry: 100, reset: 900 },
    ])
  })
  it('waits for the next window when the current count alone is too high', () => {
    const r = run(p, [
      [500, 8],
      [600, 3], // cur 8 + 3 > 10: next window, where floor(8·(1000−e)/1000) ≤ 7 from e = 1
    ])
    // Reset: 8·(1000−e) < 1000 from e = 876 of the next window.
    expect(r[1]).toEqual({ allowed: false, remaining: 2, retry: 401, reset: 1276 })
  })
  it('a clock stepping back into the previous window is evaluated at the newer window start', () => {
    // ADR 0002: a lagging clock is conservative; the newer window is neither wiped nor reweighted.
    const r = run(p, [
      [1000, 5],
      [999, 5], // as at 1000: estimate 5
      [1000, 1], // estimate 10 → denied until the next window, where 10 weighs ≤ 9 from e = 1
      [0, 10],
    ])
    expect(r).toEqual([
      { allowed: true, remaining: 5, retry: 0, reset: 1801 },
      { allowed: true, remaining: 0, retry: 0, reset: 1902 },
      { allowed: false, remaining: 0, retry: 1001, reset: 1901 },
      { allowed: false, remaining: 0, retry: 2901, reset: 2901 },
    ])
    expect(
      run(p, [
        [0, 10],
        [1500, 1], // estimate floor(10·500/1000) = 5 → allowed
        [999, 1], // at e = 0 the previous window weighs 10: 1 + 10 > 10 → denied
      ])[2],
    ).toEqual({ allowed: false, remaining: 0, retry: 102, reset: 1002 })
  })
})

describe('token bucket', () => {
  it('refills fractions exactly (3 per second, a request every 90 ms)', () => {
    const p: Policy = { algorithm: 'token-bucket', capacity: 10, refillRate: 3, refillIntervalMs: 1000 }
    const requests: [number, number][] = []
    for (let t = 0; t < 60_000; t += 90) requests.push([t, 1])
    const admitted = run(p, requests).filter((d) => d.allowed).length
    // 10 at once, then floor(3 · 59.94) = 179 refills; the seed's floor-and-reset refill (0.27 of
    // a token per request, floored to 0) would never refill at all.
    expect(admitted).toBe(10 + 179)
  })
  it('reports retry and reset in whole ms rounded up', () => {
    const p: Policy = { algorithm: 'token-bucket', capacity: 2, refillRate: 3, refillIntervalMs: 1000 }
    expect(
      run(p, [
        [0, 2],
        [0, 1],
        [1, 1],
      ]),
    ).toEqual([
      { allowed: true, remaining: 0, retry: 0, reset: 667 },
      { allowed: false, remaining: 0, retry: 334, reset: 667 },
      { allowed: false, remaining: 0, retry: 333, reset: 666 },
    ])
  })
})

describe('leaky bucket', () => {
  it('police: starts empty, drains continuously', () => {
    const p: Policy = {
      algorithm: 'leaky-bucket',
      mode: 'police',
      capacity: 2,
      leakRate: 1,
      leakIntervalMs: 1000,
    }
    expect(
      run(p, [
        [0, 1],
        [0, 1],
        [0, 1],
        [500, 1],
        [1000, 1],
      ]),
    ).toEqual([
      { allowed: true, remaining: 1, retry: 0, reset: 1000 },
      { allowed: true, remaining: 0, retry: 0, reset: 2000 },
      { allowed: false, remaining: 0, retry: 1000, reset: 2000 },
      { allowed: false, remaining: 0, retry: 500, reset: 1500 },
      { allowed: true, remaining: 0, retry: 0, reset: 2000 },
    ])
  })
  it('shape with Q = 0 spaces requests at least T apart', () => {
    const p: Policy = {
      algorithm: 'leaky-bucket',
      mode: 'shape',
      capacity: 0,
      leakRate: 4,
      leakIntervalMs: 1000,
    }
    expect(
      run(p, [
        [0, 1],
        [100, 1],
        [250, 1],
        [250, 2],
      ]),
    ).toEqual([
      { allowed: true, remaining: 0, retry: 0, reset: 250 },
      { allowed: false, remaining: 0, retry: 150, reset: 150 },
      { allowed: true, remaining: 0, retry: 0, reset: 250 },
      { allowed: false, remaining: 0, retry: Number.POSITIVE_INFINITY, reset: 250 },
    ])
  })
})

describe('GCRA', () => {
  it('bursts, then admits one per T = period / limit', () => {
    const p: Policy = { algorithm: 'gcra', limit: 3, periodMs: 1000, burst: 2 }
    expect(
      run(p, [
        [0, 1],
        [0, 1],
        [0, 1],
        [333, 1],
        [334, 1],
        [334, 3],
      ]),
    ).toEqual([
      { allowed: true, remaining: 1, retry: 0, reset: 334 },
      { allowed: true, remaining: 0, retry: 0, reset: 667 },
      { allowed: false, remaining: 0, retry: 334, reset: 667 },
      { allowed: false, remaining: 0, retry: 1, reset: 334 },
      { allowed: true, remaining: 0, retry: 0, reset: 666 },
      { allowed: false, remaining: 0, retry: Number.POSITIVE_INFINITY, reset: 666 },
    ])
  })
})

describe('sliding log', () => {
  it('counts entries while now − ts < W and retries when enough cost has left', () => {
    const rule = compile({ algorithm: 'sliding-log', limit: 4, windowMs: 1000 })
    if (rule.kind !== 'log') throw new Error('log rule')
    const out = newVerdict()
    let log: Parameters<typeof rule.commit>[0]
    const requests: [number, number][] = [
      [0, 2],
      [100, 1],
      [100, 1], // coalesced with the entry at 100
      [200, 1], // 4 counted → denied until the entry at 0 (cost 2) leaves at 1000
      [999, 3], // still 4 counted; needs 3 free → both entries (0 and 100) must leave: 1100
      [1000, 2], // the entry at 0 left: 2 counted, 2 fit
    ]
    const seen = requests.map(([now, cost]) => {
      rule.decide(log, now, cost, out)
      if (out.allowed) log = rule.commit(log, now, cost)
      return [out.allowed, out.remaining, out.retryAfterMs, out.resetAfterMs]
    })
    expect(seen).toEqual([
      [true, 2, 0, 1000],
      [true, 1, 0, 1000],
      [true, 0, 0, 1000],
      [false, 0, 800, 900],
      [false, 0, 101, 101],
      [true, 0, 0, 1000],
    ])
  })
})
