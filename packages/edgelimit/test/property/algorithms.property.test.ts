import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type PlainState, type Policy, step } from '../../src/core/index.js'
import {
  type AlgorithmSpec,
  createLimiter,
  type Decision,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js'
import { manualClock } from '../../src/testing/index.js'
import { createModel, type ModelPolicy, type ModelVerdict } from './reference-model.js'

// Every algorithm against an independent, exact, brute-force model of REFERENCE.md §1–§2
// (./reference-model.ts), through both the limiter (memory store) and the pure core `step()`.

const NUM_RUNS = 300

// ---------------------------------------------------------------------------------------------
// Generators: small limits, so that traces hit denials, refills and window edges often.

const limitArb = fc.integer({ min: 1, max: 20 })
/** Windows and periods 1..5000 ms, with extra weight on very short ones. */
const windowArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 5000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 20 }) },
)
const rateArb = fc.integer({ min: 1, max: 20 })
const intervalArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 3000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 30 }) },
)

/** Epoch start: 0, near 0, or anywhere up to 2e12 (so windows are not aligned to the trace). */
const epochArb = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 0, max: 100_000 }),
  fc.bigInt({ min: 0n, max: 2_000_000_000_000n }).map(Number),
)

interface Request {
  readonly dt: number
  /** 0 is a peek: decides, never charges. */
  readonly cost: number
}

const requestArb: fc.Arbitrary<Request> = fc.record({
  dt: fc.oneof(
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 3000 }) },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 40 }) },
    { weight: 1, arbitrary: fc.constant(0) },
  ),
  cost: fc.oneof(
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 25 }) },
    { weight: 4, arbitrary: fc.integer({ min: 0, max: 3 }) },
  ),
})
/** Up to 60 requests (`size: 'max'`: fast-check's default size would keep arrays near 10). */
const traceArb = fc.array(requestArb, { minLength: 1, maxLength: 60, size: 'max' })
/** The same, with some steps back (a lagging or skewed clock; time stays ≥ 0). */
const laggingTraceArb = fc.array(
  fc.oneof(
    { weight: 3, arbitrary: requestArb },
    {
      weight: 1,
      arbitrary: fc.record({ dt: fc.integer({ min: -3000, max: -1 }), cost: requestArb.map((r) => r.cost) }),
    },
  ),
  { minLength: 1, maxLength: 60, size: 'max' },
)

const windowPolicy = (algorithm: 'fixed-window' | 'sliding-log' | 'sliding-window') =>
  fc.record({ algorithm: fc.constant(algorithm), limit: limitArb, windowMs: windowArb })

const POLICIES: Readonly<Record<string, fc.Arbitrary<ModelPolicy>>> = {
  'fixed window': windowPolicy('fixed-window'),
  'sliding log': windowPolicy('sliding-log'),
  'sliding-window counter': windowPolicy('sliding-window'),
  'token bucket': fc.record({
    algorithm: fc.constant('token-bucket' as const),
    capacity: limitArb,
    refillRate: rateArb,
    refillIntervalMs: intervalArb,
  }),
  'leaky bucket (police)': fc.record({
    algorithm: fc.constant('leaky-bucket' as const),
    mode: fc.constant('police' as const),
    capacity: limitArb,
    leakRate: rateArb,
    leakIntervalMs: intervalArb,
  }),
  'leaky bucket (shape)': fc.record({
    algorithm: fc.constant('leaky-bucket' as const),
    mode: fc.constant('shape' as const),
    // Q = 0 is the strict fixed-rate limiter.
    capacity: fc.integer({ min: 0, max: 20 }),
    leakRate: rateArb,
    leakIntervalMs: intervalArb,
  }),
  gcra: fc.record({
    algorithm: fc.constant('gcra' as const),
    limit: rateArb,
    periodMs: intervalArb,
    burst: fc.integer({ min: 1, max: 20 }),
  }),
}

// ---------------------------------------------------------------------------------------------
// The same policy three ways: the model's, the public factory's, the core's.

function toSpec(p: ModelPolicy): AlgorithmSpec {
  switch (p.algorithm) {
    case 'fixed-window':
      return fixedWindow({ limit: p.limit, window: p.windowMs })
    case 'sliding-log':
      return slidingLog({ limit: p.limit, window: p.windowMs })
    case 'sliding-window':
      return slidingWindow({ limit: p.limit, window: p.windowMs })
    case 'token-bucket':
      return tokenBucket({
        capacity: p.capacity,
        refillRate: p.refillRate,
        refillInterval: p.refillIntervalMs,
      })
    case 'leaky-bucket':
      return leakyBucket({
        capacity: p.capacity,
        leakRate: p.leakRate,
        leakInterval: p.leakIntervalMs,
        mode: p.mode,
      })
    case 'gcra':
      return gcra({ limit: p.limit, period: p.periodMs, burst: p.burst })
  }
}

function toPolicy(p: ModelPolicy): Policy {
  return { ...p }
}

const isShape = (p: ModelPolicy) => p.algorithm === 'leaky-bucket' && p.mode === 'shape'

/**
 * What the limiter's Decision must be: `reason` only on denial, `delayMs` only for shaping
 * admissions. Compared with `toEqual`, so an absent field and one set to `undefined` are the same.
 */
function expectedDecision(p: ModelPolicy, m: ModelVerdict): Record<string, unknown> {
  return {
    allowed: m.allowed,
    limit: m.limit,
    remaining: m.remaining,
    resetAfterMs: m.resetAfterMs,
    retryAfterMs: m.retryAfterMs,
    ...(isShape(p) && m.allowed ? { delayMs: m.delayMs } : {}),
    ...(m.reason !== undefined ? { reason: m.reason } : {}),
  }
}

function observedDecision(d: Decision): Record<string, unknown> {
  const { rules: _rules, ...rest } = d
  return rest
}

/** Replays one trace through the model, the limiter and `step()`, comparing every decision. */
function replay(p: ModelPolicy, t0: number, trace: readonly Request[]): void {
  const clock = manualClock(t0)
  const limiter = createLimiter({ rules: [{ name: 'r', algorithm: toSpec(p) }], clock })
  const policy = toPolicy(p)
  expect(limiter.rules[0]?.policy).toEqual(policy)
  const model = createModel(p)
  let state: PlainState | undefined
  let now = t0
  trace.forEach(({ dt, cost }, i) => {
    now = Math.max(0, now + dt)
    clock.set(now)
    const at = `step ${i} (t0 + ${now - t0} ms, t = ${now}, cost ${cost})`
    const want = model.decide(now, cost)

    const core = step(policy, state, now, cost)
    state = core.state
    const { allowed, reason, remaining, retryAfterMs, resetAfterMs, delayMs } = core.verdict
    expect(
      { allowed, reason, remaining, retryAfterMs, resetAfterMs, delayMs },
      `step(): ${at}`,
    ).toStrictEqual({
      allowed: want.allowed,
      reason: want.reason,
      remaining: want.remaining,
      retryAfterMs: want.retryAfterMs,
      resetAfterMs: want.resetAfterMs,
      delayMs: want.delayMs,
    })

    const decision = limiter.limitSync('k', { cost })
    const expected = expectedDecision(p, want)
    expect(observedDecision(decision), `limitSync(): ${at}`).toEqual(expected)
    expect(decision.rules, `limitSync() rules: ${at}`).toEqual([{ name: 'r', shadow: false, ...expected }])
  })
}

describe('every algorithm agrees with the exact reference model', () => {
  for (const [name, policyArb] of Object.entries(POLICIES)) {
    it(name, () => {
      fc.assert(
        fc.property(policyArb, epochArb, traceArb, (p, t0, trace) => replay(p, t0, trace)),
        { numRuns: NUM_RUNS },
      )
    })
  }
})

describe('a clock stepping back: the window counters agree with the model (ADR 0002)', () => {
  for (const name of ['fixed window', 'sliding-window counter']) {
    it(name, () => {
      fc.assert(
        fc.property(POLICIES[name] as fc.Arbitrary<ModelPolicy>, epochArb, laggingTraceArb, (p, t0, trace) =>
          replay(p, t0, trace),
        ),
        { numRuns: NUM_RUNS },
      )
    })
  }
})

// ---------------------------------------------------------------------------------------------
// Invariants, checked on the real limiter only.

describe('invariants', () => {
  it('the sliding log never admits more than its limit (total cost) in any span of its window', () => {
    const denseTrace = fc.array(
      fc.record({ dt: fc.integer({ min: 0, max: 300 }), cost: fc.integer({ min: 0, max: 6 }) }),
      { minLength: 1, maxLength: 120 },
    )
    fc.assert(
      fc.property(
        limitArb,
        fc.integer({ min: 1, max: 2000 }),
        epochArb,
        denseTrace,
        (limit, w, t0, trace) => {
          const clock = manualClock(t0)
          const limiter = createLimiter({
            rules: [{ name: 'r', algorithm: slidingLog({ limit, window: w }) }],
            clock,
          })
          const admitted: { t: number; cost: number }[] = []
          let now = t0
          for (const { dt, cost } of trace) {
            now += dt
            clock.set(now)
            if (limiter.limitSync('k', { cost }).allowed && cost > 0) admitted.push({ t: now, cost })
          }
          // The fullest span [a, a + W) ends at an admission: check (t − W, t] for each.
          for (const { t } of admitted) {
            const inSpan = admitted.filter((x) => x.t > t - w && x.t <= t).reduce((s, x) => s + x.cost, 0)
            expect(inSpan, `span (${t - w}, ${t}]`).toBeLessThanOrEqual(limit)
          }
        },
      ),
      { numRuns: NUM_RUNS },
    )
  })

  it("the token bucket's remaining never exceeds its capacity", () => {
    fc.assert(
      fc.property(
        POLICIES['token bucket'] as fc.Arbitrary<ModelPolicy>,
        epochArb,
        traceArb,
        (p, t0, trace) => {
          if (p.algorithm !== 'token-bucket') throw new Error('unreachable')
          const clock = manualClock(t0)
          const limiter = createLimiter({ rules: [{ name: 'r', algorithm: toSpec(p) }], clock })
          let now = t0
          for (const { dt, cost } of trace) {
            now += dt
            clock.set(now)
            const { remaining } = limiter.limitSync('k', { cost })
            expect(remaining).toBeGreaterThanOrEqual(0)
            expect(remaining).toBeLessThanOrEqual(p.capacity)
          }
        },
      ),
      { numRuns: NUM_RUNS },
    )
  })

  it('a steady client at exactly the configured rate is never denied over one hour', () => {
    const HOUR = 3_600_000
    // Sustained rates, including periods that are not whole ms (1000/3, 1000/7). With a whole-ms
    // period T the client is exactly periodic and even the strictest policies pass it: capacity /
    // burst 1, shaping queue 0 (each request then lands exactly on the admission boundary). With a
    // fractional T the request times ceil(i·T) jitter by up to 1 ms, so the policies need room for
    // one more: capacity / burst ≥ 2, queue ≥ 1. (With burst 1, 3 per 1000 ms rightly denies the
    // request at t = 667: TAT 666.67 + 333.33 − 667 > 333.33.)
    const rates = fc.oneof(
      fc.constantFrom(
        { rate: 3, intervalMs: 1000 },
        { rate: 7, intervalMs: 1000 },
        { rate: 10, intervalMs: 1000 },
        { rate: 1, intervalMs: 1000 },
        { rate: 2, intervalMs: 3000 },
        { rate: 20, intervalMs: 1000 },
        { rate: 13, intervalMs: 997 },
      ),
      fc
        // At most 20 per second, so that an hour stays cheap to simulate.
        .record({ rate: fc.integer({ min: 1, max: 20 }), intervalMs: fc.integer({ min: 1000, max: 3000 }) }),
    )
    fc.assert(
      fc.property(rates, fc.integer({ min: 1, max: 20 }), epochArb, ({ rate, intervalMs }, size, t0) => {
        const wholePeriod = intervalMs % rate === 0
        const room = wholePeriod ? size : Math.max(2, size)
        const algorithms: Record<string, AlgorithmSpec> = {
          'token bucket': tokenBucket({ capacity: room, refillRate: rate, refillInterval: intervalMs }),
          gcra: gcra({ limit: rate, period: intervalMs, burst: room }),
          'leaky police': leakyBucket({ capacity: room, leakRate: rate, leakInterval: intervalMs }),
          'leaky shape': leakyBucket({
            capacity: room - 1,
            leakRate: rate,
            leakInterval: intervalMs,
            mode: 'shape',
          }),
        }
        const clock = manualClock(t0)
        const limiter = createLimiter({
          rules: Object.entries(algorithms).map(([name, algorithm]) => ({
            name: name.replace(' ', '-'),
            algorithm,
          })),
          clock,
        })
        let sent = 0
        for (let i = 0; ; i++) {
          // ceil(i · P / rate), in integers.
          const t = Math.floor((i * intervalMs + rate - 1) / rate)
          if (t >= HOUR) break
          clock.set(t0 + t)
          const d = limiter.limitSync('steady', { cost: 1 })
          sent++
          if (!d.allowed) {
            const who = d.rules.filter((r) => !r.allowed).map((r) => r.name)
            expect.fail(`request ${i} at t0 + ${t} ms denied by ${who.join(', ')}`)
          }
          // The shaping queue never builds up: the wait stays below 1 ms (0 for whole-ms periods).
          expect(d.delayMs, `delay of request ${i}`).toBeLessThanOrEqual(wholePeriod ? 0 : 1)
        }
        // Every request was sent and admitted: i = 0 … floor((HOUR − 1) · rate / P), with no drift.
        expect(sent).toBe(Math.floor(((HOUR - 1) * rate) / intervalMs) + 1)
        if (rate === 3 && intervalMs === 1000) expect(sent).toBe(10_800)
      }),
      { numRuns: 20 },
    )
  })
})
