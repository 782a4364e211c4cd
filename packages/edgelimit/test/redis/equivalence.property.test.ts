import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { AlgorithmSpec } from '../../src/algorithms.js'
import { type PlainState, step } from '../../src/core/index.js'
import {
  createLimiter,
  type Decision,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { manualClock } from '../../src/testing/index.js'
import { redisFixture } from '../support/redis-client.js'
import { summary } from '../workerd/support/trace.js'

const fixture = redisFixture()

const small = fc.integer({ min: 1, max: 12 })
const ms = fc.integer({ min: 1, max: 4000 })
const algorithms: Record<string, fc.Arbitrary<AlgorithmSpec>> = {
  'fixed-window': fc.record({ limit: small, window: ms }).map(fixedWindow),
  'sliding-log': fc.record({ limit: small, window: ms }).map(slidingLog),
  'sliding-window': fc.record({ limit: small, window: ms }).map(slidingWindow),
  'token-bucket': fc.record({ capacity: small, refillRate: small, refillInterval: ms }).map(tokenBucket),
  'leaky-police': fc.record({ capacity: small, leakRate: small, leakInterval: ms }).map(leakyBucket),
  'leaky-shape': fc
    .record({ capacity: fc.integer({ min: 0, max: 10 }), leakRate: small, leakInterval: ms })
    .map((o) => leakyBucket({ ...o, mode: 'shape' })),
  gcra: fc.record({ limit: small, period: ms, burst: small }).map(gcra),
}
/** Time steps, some of them back (a client clock that lags or skews: ADR 0002), and costs. */
const dt = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 1500 }) },
  { weight: 1, arbitrary: fc.integer({ min: -1500, max: -1 }) },
)
const trace = fc.array(fc.tuple(dt, fc.integer({ min: 0, max: 14 })), { minLength: 1, maxLength: 40 })

let run = 0
describe('Lua scripts ≡ TypeScript core (client clock), field by field', () => {
  for (const [name, algorithm] of Object.entries(algorithms)) {
    it(name, async () => {
      await fc.assert(
        fc.asyncProperty(algorithm, fc.integer({ min: 0, max: 2e12 }), trace, async (spec, t0, steps) => {
          const clock = manualClock(t0)
          const limiter = createLimiter({
            rules: [{ name, algorithm: spec }],
            store: redisStore({ client: fixture.client, clock: 'client', prefix: 'eq' }),
            clock,
            // The scripts alone: no deadline, breaker or denial cache in between.
            timeout: false,
            breaker: false,
            denyCache: false,
          })
          const policy = limiter.rules[0]?.policy
          if (policy === undefined) throw new Error('no rule')
          const key = `k${run++}`
          let state: PlainState | undefined
          for (const [dt, cost] of steps) {
            clock.set(Math.max(0, clock.now() + dt))
            const expected = step(policy, state, clock.now(), cost)
            if (cost > 0) state = expected.state
            const d = await limiter.limit(key, { cost })
            const got = [d.allowed, d.remaining, d.resetAfterMs, d.retryAfterMs, d.delayMs ?? 0, d.reason]
            const v = expected.verdict
            const want = [v.allowed, v.remaining, v.resetAfterMs, v.retryAfterMs, v.delayMs, v.reason]
            if (JSON.stringify(got) !== JSON.stringify(want) || got[3] !== want[3]) {
              throw new Error(
                `t=${clock.now()} cost=${cost}: Lua ${JSON.stringify(got)} ≠ core ${JSON.stringify(want)}`,
              )
            }
          }
        }),
        { numRuns: 60 },
      )
    })
  }
})

/** A decision as plain data, field by field (the per-rule entries too). */
const plain = (d: Decision) => JSON.stringify(summary(d))

describe('Redis with the default denial cache ≡ memory store, decision by decision', () => {
  const anyAlgorithm = fc.oneof(...Object.values(algorithms))
  const op = fc.record({
    // Mostly a flood (the denial cache's case), now and then a pause or a clock stepping back.
    dt: fc.oneof(
      { weight: 12, arbitrary: fc.integer({ min: 0, max: 40 }) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 1500 }) },
      { weight: 1, arbitrary: fc.integer({ min: -800, max: -1 }) },
    ),
    key: fc.constantFrom('a', 'a', 'a', 'b'),
    cost: fc.oneof(
      { weight: 8, arbitrary: fc.constant(1) },
      { weight: 2, arbitrary: fc.integer({ min: 0, max: 4 }) },
    ),
    what: fc.oneof(
      { weight: 30, arbitrary: fc.constant('limit') },
      { weight: 2, arbitrary: fc.constant('peek') },
      { weight: 1, arbitrary: fc.constant('reset') },
    ),
  })
  it('over random rule sets (1–3 rules), keys, costs and resets', async () => {
    let cacheHits = 0
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 3, arbitrary: fc.array(anyAlgorithm, { minLength: 1, maxLength: 1 }) },
          { weight: 2, arbitrary: fc.array(anyAlgorithm, { minLength: 2, maxLength: 3 }) },
        ),
        fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
        fc.array(op, { minLength: 20, maxLength: 80 }),
        async (specs, shadows, ops) => {
          const clock = manualClock(1_000_000)
          const rules = specs.map((algorithm, i) => ({
            name: `r${i}`,
            algorithm,
            ...(shadows[i] && i > 0 ? { mode: 'shadow' as const } : {}),
          }))
          const memory = createLimiter({ rules, clock })
          const redis = createLimiter({
            rules,
            store: redisStore({ client: fixture.client, clock: 'client', prefix: `dc${run++}` }),
            clock,
            timeout: false,
            breaker: false,
            onEvent: (e) => {
              if (e.type === 'decision' && e.source === 'cache') cacheHits++
            },
          })
          const log: string[] = []
          for (const { dt, key, cost, what } of ops) {
            clock.set(Math.max(0, clock.now() + dt))
            log.push(`t=${clock.now()} ${what}(${key}, ${cost})`)
            if (what === 'reset') {
              await Promise.all([memory.reset(key), redis.reset(key)])
              continue
            }
            const [m, r] =
              what === 'peek'
                ? [await memory.peek(key), await redis.peek(key)]
                : [await memory.limit(key, { cost }), await redis.limit(key, { cost })]
            if (plain(m) !== plain(r)) {
              throw new Error(`${log.join('; ')}\n  memory ${plain(m)}\n  redis  ${plain(r)}`)
            }
          }
        },
      ),
      { numRuns: 150 },
    )
    // The cache answered some of them (else this compares the scripts alone).
    expect(cacheHits).toBeGreaterThan(200)
  })
})
