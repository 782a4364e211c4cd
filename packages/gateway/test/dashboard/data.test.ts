import { describe, expect, test } from 'vitest'
import { seriesFor } from '../../src/server/dashboard.js'
import { createDashboardData, OUTCOMES, type Outcome } from '../../src/server/dashboard-data.js'

/** A clock the test moves by hand (epoch ms). */
function clock(start = 1_000_000_000) {
  let now = start
  return {
    now: () => now,
    set: (ms: number) => {
      now = ms
    },
    add: (ms: number) => {
      now += ms
    },
  }
}

describe('dashboard data: one-second points', () => {
  test('decisions land in the second they were made, per rule and outcome', () => {
    const c = clock(1_000_000_200)
    const data = createDashboardData({ now: c.now })
    for (let i = 0; i < 3; i++) data.decision('api', '', 'allowed', 'k1')
    c.set(1_000_000_900)
    data.decision('api', '', 'denied', 'k1')
    c.set(1_000_001_100)
    data.decision('search', '', 'shadow_denied', 'k2')
    data.decision('search', '', 'shadow_denied', 'k2')
    expect(data.points()).toEqual([
      { t: 1_000_000, counts: { 'api/allowed': 3, 'api/denied': 1 }, errors: 0 },
      { t: 1_000_001, counts: { 'search/shadow_denied': 2 }, errors: 0 },
    ])
    // The current second is partial: asked again later, it has grown.
    data.decision('search', '', 'allowed', 'k2')
    expect(data.points(1_000_001)).toEqual([
      { t: 1_000_001, counts: { 'search/shadow_denied': 2, 'search/allowed': 1 }, errors: 0 },
    ])
    expect(data.series()).toEqual([
      { key: 'api/allowed', rule: 'api', outcome: 'allowed', total: 3 },
      { key: 'api/denied', rule: 'api', outcome: 'denied', total: 1 },
      { key: 'search/shadow_denied', rule: 'search', outcome: 'shadow_denied', total: 2 },
      { key: 'search/allowed', rule: 'search', outcome: 'allowed', total: 1 },
    ])
  })

  test('quiet seconds are zero points; asking rolls the clock forward without traffic', () => {
    const c = clock(5_000)
    const data = createDashboardData({ now: c.now })
    data.decision('a', '', 'allowed')
    c.add(3_000)
    const points = data.points()
    expect(points.map((p) => p.t)).toEqual([5, 6, 7, 8])
    expect(points.map((p) => p.counts['a/allowed'] ?? 0)).toEqual([1, 0, 0, 0])
  })

  test('the window holds `seconds` points, the oldest dropped first; totals stay', () => {
    const c = clock(0)
    const data = createDashboardData({ now: c.now, seconds: 60 })
    for (let s = 0; s < 1000; s++) {
      c.set(s * 1000 + 500)
      data.decision('a', '', s % 2 === 0 ? 'allowed' : 'denied')
    }
    const points = data.points()
    expect(points).toHaveLength(60)
    expect(points[0]?.t).toBe(940)
    expect(points[59]?.t).toBe(999)
    const inWindow = points.reduce(
      (n, p) => n + (p.counts['a/allowed'] ?? 0) + (p.counts['a/denied'] ?? 0),
      0,
    )
    expect(inWindow).toBe(60)
    expect(data.series().map((s) => s.total)).toEqual([500, 500])
  })

  test('a long idle gap costs one window of empty points, not one per second of the gap', () => {
    const c = clock(1_000)
    const data = createDashboardData({ now: c.now, seconds: 10 })
    data.decision('a', '', 'allowed')
    c.add(1e12) // ~31 years
    data.decision('a', '', 'denied')
    const points = data.points()
    expect(points).toHaveLength(10)
    expect(points.slice(0, 9).every((p) => Object.keys(p.counts).length === 0)).toBe(true)
    expect(points[9]).toEqual({ t: 1e9 + 1, counts: { 'a/denied': 1 }, errors: 0 })
  })

  test('a clock that goes back counts into the current second', () => {
    const c = clock(10_500)
    const data = createDashboardData({ now: c.now })
    data.decision('a', '', 'allowed')
    c.set(9_000)
    data.decision('a', '', 'allowed')
    expect(data.points()).toEqual([{ t: 10, counts: { 'a/allowed': 2 }, errors: 0 }])
  })

  test('rules idle for a whole window are forgotten once there are many', () => {
    const c = clock(0)
    const data = createDashboardData({ now: c.now, seconds: 10 })
    for (let r = 0; r < 100; r++) data.decision(`rule-${r}`, '', 'allowed')
    expect(data.series()).toHaveLength(100)
    c.add(20_000)
    data.decision('kept', '', 'allowed')
    expect(data.series().map((s) => s.rule)).toEqual(['kept'])
  })

  test('a forgotten series keeps its total since the start: it goes on from there when it comes back', () => {
    const c = clock(0)
    const data = createDashboardData({ now: c.now, seconds: 10 })
    const others = (outcomes: readonly Outcome[]) => {
      for (let r = 1; r < 30; r++) for (const o of outcomes) data.decision(`r${r}`, '', o)
    }
    // 30 rules × 4 outcomes = 120 series, more than are kept once idle.
    for (const o of OUTCOMES) data.decision('r0', '', o)
    others(OUTCOMES)
    for (let i = 0; i < 100; i++) data.decision('r0', '', 'allowed')
    // r0 idle for 2 windows while the others keep counting: forgotten.
    for (let t = 0; t < 20; t++) {
      c.add(1_000)
      others(['allowed'])
    }
    expect(data.series().filter((s) => s.rule === 'r0')).toEqual([])
    data.decision('r0', '', 'allowed')
    expect(data.series().filter((s) => s.rule === 'r0')).toEqual([
      { key: 'r0/allowed', rule: 'r0', outcome: 'allowed', total: 102 },
    ])
    // Forgotten again: a rule in force still shows its totals, as does `total`.
    c.add(20_000)
    others(OUTCOMES)
    c.add(1_000)
    expect(data.series().some((s) => s.rule === 'r0')).toBe(false)
    expect([data.total('r0', 'allowed'), data.total('r0', 'denied'), data.total('never', 'denied')]).toEqual([
      102, 1, 0,
    ])
    const context = {
      rules: [{ name: 'r0', mode: 'enforce' as const, enforce: 100 }],
      store: { type: 'memory', status: 'ready' },
      generation: 1,
      draining: false,
    }
    // Every outcome it counted, the ones its mode does not expect too (unknown: failing open).
    expect(seriesFor(data, context).filter((s) => s.rule === 'r0')).toEqual(
      OUTCOMES.map((outcome) => ({
        key: `r0/${outcome}`,
        rule: 'r0',
        outcome,
        total: outcome === 'allowed' ? 102 : 1,
      })),
    )
    data.decision('r0', '', 'denied')
    expect(data.series().find((s) => s.key === 'r0/denied')?.total).toBe(2)
    expect(data.total('r0', 'denied')).toBe(2)
  })
})

describe('dashboard data: store latency and errors', () => {
  test('p50, p99 and max per second from a histogram of 10 % buckets', () => {
    const c = clock(2_000)
    const data = createDashboardData({ now: c.now })
    for (let ms = 1; ms <= 100; ms++) data.latency(ms)
    data.storeError('timeout')
    c.add(1_000)
    data.latency(0.25)
    data.storeError('timeout')
    data.storeError('breaker-open')
    c.add(1_000)
    const [first, second, third] = data.points()
    expect(first?.latency?.n).toBe(100)
    expect(first?.latency?.max).toBe(100)
    expect(first?.latency?.p50).toBeGreaterThanOrEqual(50)
    expect(first?.latency?.p50).toBeLessThanOrEqual(55)
    expect(first?.latency?.p99).toBeGreaterThanOrEqual(99)
    expect(first?.latency?.p99).toBeLessThanOrEqual(100)
    expect(first?.errors).toBe(1)
    // One sample: every quantile is that sample (capped by the max seen).
    expect(second?.latency).toEqual({ n: 1, p50: 0.25, p99: 0.25, max: 0.25 })
    expect(second?.errors).toBe(2)
    expect(third).toEqual({ t: 4, counts: {}, errors: 0 })
    expect(data.storeErrors()).toEqual({ timeout: 2, 'breaker-open': 1 })
  })
})

describe('dashboard data: top keys and breakers', () => {
  test('exact counts per (rule, key), most requests first', () => {
    const c = clock(0)
    const data = createDashboardData({ now: c.now })
    for (let i = 0; i < 5; i++) data.decision('login', '', i < 3 ? 'allowed' : 'denied', 'K-a')
    for (let i = 0; i < 2; i++) data.decision('login', '', 'allowed', 'K-b')
    // Its state not known (failing open): neither allowed nor denied.
    data.decision('login', '', 'unknown', 'K-b')
    for (let i = 0; i < 4; i++) data.decision('search', 'free', i < 1 ? 'allowed' : 'shadow_denied', 'K-a')
    expect(data.topKeys(3)).toEqual([
      {
        rule: 'login',
        tier: '',
        key: 'K-a',
        requests: 5,
        allowed: 3,
        denied: 2,
        shadowDenied: 0,
        unknown: 0,
        maxUndercount: 0,
      },
      {
        rule: 'search',
        tier: 'free',
        key: 'K-a',
        requests: 4,
        allowed: 1,
        denied: 0,
        shadowDenied: 3,
        unknown: 0,
        maxUndercount: 0,
      },
      {
        rule: 'login',
        tier: '',
        key: 'K-b',
        requests: 3,
        allowed: 2,
        denied: 0,
        shadowDenied: 0,
        unknown: 1,
        maxUndercount: 0,
      },
    ])
    expect(data.keyStats()).toEqual({ exact: true, held: 3 })
  })

  test('bounded: a flood of one-off keys is dropped, the heavy hitters stay', () => {
    const c = clock(0)
    const data = createDashboardData({ now: c.now, topKeysCapacity: 100 })
    for (let i = 0; i < 20_000; i++) {
      data.decision('api', '', 'allowed', `bot-${i}`)
      if (i % 10 === 0) data.decision('api', '', 'denied', 'heavy')
      if (i % 40 === 0) data.decision('api', '', 'allowed', 'medium')
    }
    const stats = data.keyStats()
    expect(stats.exact).toBe(false)
    expect(stats.held).toBeLessThanOrEqual(100)
    const [first, second] = data.topKeys(2)
    expect(first).toMatchObject({ key: 'heavy', requests: 2000, denied: 2000, maxUndercount: 0 })
    expect(second).toMatchObject({ key: 'medium', requests: 500, maxUndercount: 0 })
  })

  test('breaker state per rule and tier, with the time of the last change', () => {
    const c = clock(1_000)
    const data = createDashboardData({ now: c.now })
    data.breaker('api', '', 'closed')
    data.breaker('api', 'pro', 'closed')
    c.set(5_000)
    data.breaker('api', '', 'open')
    c.set(6_000)
    data.breaker('api', '', 'open')
    expect(data.breakers()).toEqual([
      { rule: 'api', tier: '', state: 'open', since: 5_000 },
      { rule: 'api', tier: 'pro', state: 'closed', since: 1_000 },
    ])
  })

  test('an open breaker reads half-open once its openMs has passed (the next call probes), without an event', () => {
    const c = clock(1_000)
    const data = createDashboardData({ now: c.now })
    data.breaker('api', '', 'open', 500)
    data.breaker('login', '', 'open')
    c.set(1_499)
    expect(data.breakers().map((b) => b.state)).toEqual(['open', 'open'])
    c.set(1_500)
    // Without an openMs, open until the breaker says otherwise.
    expect(data.breakers()).toEqual([
      { rule: 'api', tier: '', state: 'half-open', since: 1_500 },
      { rule: 'login', tier: '', state: 'open', since: 1_000 },
    ])
    c.set(2_000)
    data.breaker('api', '', 'half-open', 500)
    data.breaker('api', '', 'open', 500)
    expect(data.breakers()[0]).toEqual({ rule: 'api', tier: '', state: 'open', since: 2_000 })
  })
})

describe('dashboard series', () => {
  test('the rules in force by mode, in policy order, then rules with data since removed', () => {
    const data = createDashboardData({ now: () => 0 })
    data.decision('old', '', 'denied')
    data.decision('probe', '', 'allowed')
    const series = seriesFor(data, {
      rules: [
        { name: 'login', mode: 'enforce', enforce: 100 },
        { name: 'probe', mode: 'shadow', enforce: 100 },
        { name: 'canary', mode: 'enforce', enforce: 25 },
      ],
      store: { type: 'memory', status: 'ready' },
      generation: 2,
      draining: false,
    })
    expect(series.map((s) => `${s.key}=${s.total}`)).toEqual([
      'login/allowed=0',
      'login/denied=0',
      'probe/allowed=1',
      'probe/shadow_denied=0',
      'canary/allowed=0',
      'canary/denied=0',
      'canary/shadow_denied=0',
      'old/denied=1',
    ])
  })

  test('unknown (failing open, or not asked) is listed once counted, beside its rule', () => {
    const data = createDashboardData({ now: () => 0 })
    const context = {
      rules: [
        { name: 'login', mode: 'enforce' as const, enforce: 100 },
        { name: 'probe', mode: 'shadow' as const, enforce: 100 },
      ],
      store: { type: 'redis', status: 'unavailable' },
      generation: 1,
      draining: false,
    }
    expect(seriesFor(data, context).map((s) => s.key)).not.toContain('login/unknown')
    data.decision('login', '', 'unknown')
    data.decision('login', '', 'unknown')
    expect(seriesFor(data, context).map((s) => `${s.key}=${s.total}`)).toEqual([
      'login/allowed=0',
      'login/denied=0',
      'login/unknown=2',
      'probe/allowed=0',
      'probe/shadow_denied=0',
    ])
  })
})
