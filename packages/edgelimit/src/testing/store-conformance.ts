import type { AlgorithmSpec } from '../algorithms.js'
import { fixedWindow, gcra, leakyBucket, slidingLog, slidingWindow, tokenBucket } from '../algorithms.js'
import { type PlainState, step } from '../core/index.js'
import { createLimiter, type Decision, type Rule } from '../limiter.js'
import type { Store } from '../stores/types.js'
import { manualClock } from './manual-clock.js'

/** Options of the store conformance suite. */
export interface ConformanceOptions {
  /** A store to test; called once per case, so each case may get a fresh one. */
  store(): Store | Promise<Store>
  /** A prefix that keeps this run's keys apart from other runs on a shared server. */
  keyPrefix?: string
}

/** One case of the suite: throws on failure. */
export interface ConformanceCase {
  readonly name: string
  run(): Promise<void>
}

/** One rule per algorithm, small enough that short traces hit every branch. */
export const CONFORMANCE_ALGORITHMS: Readonly<Record<string, AlgorithmSpec>> = {
  'fixed-window': fixedWindow({ limit: 5, window: '1s' }),
  'sliding-log': slidingLog({ limit: 5, window: '1s' }),
  'sliding-window': slidingWindow({ limit: 5, window: '1s' }),
  'token-bucket': tokenBucket({ capacity: 5, refillRate: 3, refillInterval: '1s' }),
  'leaky-police': leakyBucket({ capacity: 5, leakRate: 3, leakInterval: '1s' }),
  'leaky-shape': leakyBucket({ capacity: 3, leakRate: 3, leakInterval: '1s', mode: 'shape' }),
  gcra: gcra({ limit: 3, period: '1s', burst: 5 }),
}

/** The store alone: no deadline, breaker or denial cache between the limiter and the store. */
const PURE = { timeout: false, breaker: false, denyCache: false } as const

/** A deterministic generator, so every store sees the same traces. */
function lcg(seed: number): () => number {
  let x = seed >>> 0
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    return x / 2 ** 32
  }
}

function fail(message: string): never {
  throw new Error(message)
}

function same(actual: unknown, expected: unknown, what: string): void {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  if (a !== e) fail(`${what}: expected ${e}, got ${a}`)
}

/** The fields every store must agree on, from a decision's first rule. */
function fields(d: Decision) {
  return {
    allowed: d.allowed,
    remaining: d.remaining,
    resetAfterMs: d.resetAfterMs,
    retryAfterMs: d.retryAfterMs,
    delayMs: d.delayMs ?? 0,
    reason: d.reason ?? null,
  }
}

/**
 * The store conformance suite: the same cases for every store, so that every store is shown to
 * give the decisions of the pure core. Framework-neutral: each case is a function that throws.
 *
 * @example
 * for (const c of storeConformance({ store: () => memoryStore() })) it(c.name, c.run)
 */
export function storeConformance(options: ConformanceOptions): ConformanceCase[] {
  const prefix =
    options.keyPrefix ?? `conf-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
  let n = 0
  const key = (name: string) => `${prefix}:${name}:${n++}`
  const cases: ConformanceCase[] = []

  /** A limiter of one rule on a fresh store of this kind, on a manual clock. */
  const oneRule = async (name: string, algorithm: AlgorithmSpec) => {
    const clock = manualClock(1_700_000_000_000)
    const limiter = createLimiter({
      rules: [{ name, algorithm }],
      store: await options.store(),
      clock,
      ...PURE,
    })
    return { clock, limiter }
  }

  /** A random trace of one algorithm through the store, decision by decision against `step()`. */
  const trace = (name: string, algorithm: AlgorithmSpec, seed: number, back: boolean) => async () => {
    const { clock, limiter } = await oneRule(name, algorithm)
    const policy = limiter.rules[0]?.policy ?? fail('no rule')
    const rnd = lcg(seed)
    const k = key(name)
    let state: PlainState | undefined
    for (let i = 0; i < 120; i++) {
      // A clock stepping back (a lagging or skewed client clock, ADR 0002) by up to 1.5 s.
      if (back && rnd() < 0.2) clock.advance(-Math.floor(rnd() * 1500))
      else clock.advance(Math.floor(rnd() * (rnd() < 0.2 ? 900 : 150)))
      const cost = rnd() < 0.8 ? 1 : Math.floor(rnd() * 7)
      const expected = step(policy, state, clock.now(), cost)
      state = cost > 0 ? expected.state : state
      const d = await limiter.limit(k, { cost })
      const v = expected.verdict
      same(
        fields(d),
        {
          allowed: v.allowed,
          remaining: v.remaining,
          resetAfterMs: v.resetAfterMs,
          retryAfterMs: v.retryAfterMs,
          delayMs: v.delayMs,
          reason: v.reason ?? null,
        },
        `${name} step ${i} (t=${clock.now()}, cost=${cost})`,
      )
    }
  }

  for (const [name, algorithm] of Object.entries(CONFORMANCE_ALGORITHMS)) {
    cases.push({
      name: `${name}: a random trace gives the pure core's decisions`,
      run: trace(name, algorithm, name.length * 7919, false),
    })
  }
  for (const [name, algorithm] of Object.entries(CONFORMANCE_ALGORITHMS)) {
    cases.push({
      name: `${name}: a clock stepping back gives the pure core's decisions`,
      run: trace(name, algorithm, name.length * 104_729, true),
    })
  }

  cases.push({
    name: 'several rules are all-or-nothing',
    async run() {
      const clock = manualClock(1_700_000_000_000)
      const rules: Rule[] = [
        { name: 'burst', algorithm: tokenBucket({ capacity: 3, refillRate: 1 }) },
        { name: 'window', algorithm: slidingWindow({ limit: 4, window: '1m' }) },
      ]
      const limiter = createLimiter({ rules, store: await options.store(), clock, ...PURE })
      const k = key('hybrid')
      const admitted: boolean[] = []
      for (let i = 0; i < 4; i++) admitted.push((await limiter.limit(k)).allowed)
      same(admitted, [true, true, true, false], 'burst of 4 against a bucket of 3')
      const d = await limiter.limit(k)
      // The window rule admitted but was not charged by the denied requests.
      same(d.rules[1]?.remaining, 1, 'window remaining after two denials')
      same(d.rules[1]?.allowed, true, 'window rule admits')
      same(d.retryAfterMs, 1000, 'retry after one refill')
      clock.advance(1000)
      same((await limiter.limit(k)).allowed, true, 'after refill')
      clock.advance(3000)
      const last = await limiter.limit(k)
      same(
        [last.allowed, last.rules[0]?.allowed, last.rules[1]?.allowed],
        [false, true, false],
        'window exhausted',
      )
      same(last.rules[0]?.remaining, 3, 'bucket not charged when the window denies')
    },
  })

  cases.push({
    name: 'peek and cost 0 never charge; reset forgets',
    async run() {
      const { limiter } = await oneRule('fw', fixedWindow({ limit: 2, window: '1m' }))
      const k = key('peek')
      for (let i = 0; i < 3; i++) same((await limiter.peek(k)).remaining, 2, 'peek on a fresh key')
      await limiter.limit(k, { cost: 2 })
      same((await limiter.peek(k)).remaining, 0, 'peek after charging 2')
      same((await limiter.limit(k)).allowed, false, 'exhausted')
      await limiter.reset(k)
      same((await limiter.limit(k)).remaining, 1, 'fresh after reset')
    },
  })

  cases.push({
    name: 'calls issued without waiting are decided in the order issued, resets included',
    async run() {
      const { limiter } = await oneRule('fw', fixedWindow({ limit: 2, window: '1m' }))
      // A reset then a decision: the decision counts from nothing, and the reset does not wipe it.
      const k = key('order')
      await limiter.limit(k, { cost: 2 })
      const reset = limiter.reset(k)
      const after = limiter.limit(k)
      await reset
      same(fields(await after), fields(await limiter.peek(k)), 'the decision after the reset, then a peek')
      same((await limiter.peek(k)).remaining, 1, 'the decision after the reset is counted')
      // Decisions, a reset, decisions, a reset, a decision: only the last one counts.
      const j = key('order-mixed')
      const calls: Promise<unknown>[] = []
      for (let round = 0; round < 2; round++) {
        calls.push(limiter.limit(j), limiter.limit(j), limiter.limit(j))
        calls.push(limiter.reset(j))
      }
      const last = limiter.limit(j)
      await Promise.all(calls)
      same((await last).remaining, 1, 'the decision after the last reset')
      same((await limiter.peek(j)).remaining, 1, 'what the last reset left, and the decision after it')
    },
  })

  cases.push({
    name: 'keys are independent, including unusual ones',
    async run() {
      const { limiter } = await oneRule('gcra', gcra({ limit: 1, period: '1h' }))
      const keys = ['a', 'b', '', ' ', '{tag}', 'ключ', '🔑', 'x'.repeat(512)].map((s) => `${prefix}:${s}`)
      for (const k of keys)
        same((await limiter.limit(k)).allowed, true, `first request for ${JSON.stringify(k)}`)
      for (const k of keys)
        same((await limiter.limit(k)).allowed, false, `second request for ${JSON.stringify(k)}`)
    },
  })

  cases.push({
    name: 'a cost above the limit is denied for ever and charges nothing',
    async run() {
      const { limiter } = await oneRule('tb', tokenBucket({ capacity: 10, refillRate: 1 }))
      const k = key('huge')
      const d = await limiter.limit(k, { cost: 11 })
      same([d.allowed, d.reason, d.retryAfterMs], [false, 'cost-exceeds-limit', null], 'cost 11 of 10')
      same((await limiter.limit(k, { cost: 10 })).allowed, true, 'cost 10 still passes')
    },
  })

  cases.push({
    name: 'shadow rules never block, and are charged only when they admit',
    async run() {
      const store = await options.store()
      const limiter = createLimiter({
        rules: [
          { name: 'enforced', algorithm: fixedWindow({ limit: 3, window: '1h' }) },
          { name: 'shadow', algorithm: fixedWindow({ limit: 1, window: '1h' }) },
        ],
        store,
      })
      const bound = store.bind(limiter.rules)
      const k = key('shadow')
      const now = 1_700_000_000_000
      const call = async (cost = 1) =>
        (await bound.evaluate(k, cost, now, { shadow: 0b10 })).map((v) => [v.allowed, v.remaining])
      same(
        await call(),
        [
          [true, 2],
          [true, 0],
        ],
        'both admit and are charged',
      )
      same(
        await call(),
        [
          [true, 1],
          [false, 0],
        ],
        'the shadow rule denies: not charged, does not block',
      )
      same(
        await call(),
        [
          [true, 0],
          [false, 0],
        ],
        'the enforced rule is charged again',
      )
      same(
        await call(),
        [
          [false, 0],
          [false, 0],
        ],
        'the enforced rule blocks',
      )
    },
  })

  cases.push({
    name: 'a forced charge spares a shadow rule that denies: it counts only what it admits',
    async run() {
      const store = await options.store()
      const limiter = createLimiter({
        rules: [
          { name: 'fw', algorithm: fixedWindow({ limit: 2, window: '1h' }) },
          { name: 'tb', algorithm: tokenBucket({ capacity: 2, refillRate: 1, refillInterval: '1h' }) },
          { name: 'log', algorithm: slidingLog({ limit: 5, window: '1h' }) },
        ],
        store,
      })
      const bound = store.bind(limiter.rules)
      const k = key('force-shadow')
      const now = 1_700_000_000_000
      // An approximate sync of 3 for a key whose tb and log rules are in shadow.
      const forced = await bound.evaluate(k, 3, now, { force: true, shadow: 0b110 })
      same(
        forced.map((v) => [v.allowed, v.reason]),
        [
          [false, 'cost-exceeds-limit'],
          [false, 'cost-exceeds-limit'],
          [true, undefined],
        ],
        'forced verdicts',
      )
      // fw holds the forced 3 (and denies); tb, which denied in shadow, holds nothing (not a debt
      // of 3 tokens); log, which admitted, holds 3.
      const after = await bound.evaluate(k, 1, now + 1)
      same(
        after.map((v) => [v.allowed, v.remaining]),
        [
          [false, 0],
          [true, 2],
          [true, 2],
        ],
        'the enforced rule holds the forced cost, a shadow rule only what it admitted',
      )
    },
  })

  cases.push({
    name: 'a forced charge counts whatever the rules decide',
    async run() {
      const store = await options.store()
      const limiter = createLimiter({
        rules: [
          { name: 'fw', algorithm: fixedWindow({ limit: 2, window: '1h' }) },
          { name: 'log', algorithm: slidingLog({ limit: 2, window: '1h' }) },
          { name: 'tb', algorithm: tokenBucket({ capacity: 2, refillRate: 1, refillInterval: '1h' }) },
        ],
        store,
      })
      const bound = store.bind(limiter.rules)
      const k = key('force')
      const now = 1_700_000_000_000
      const forced = await bound.evaluate(k, 3, now, { force: true })
      same(
        forced.map((v) => [v.allowed, v.reason]),
        [
          [false, 'cost-exceeds-limit'],
          [false, 'cost-exceeds-limit'],
          [false, 'cost-exceeds-limit'],
        ],
        'forced verdicts',
      )
      const after = await bound.evaluate(k, 1, now + 1)
      same(
        after.map((v) => [v.allowed, v.remaining]),
        [
          [false, 0],
          [false, 0],
          [false, 0],
        ],
        'every rule holds the forced cost',
      )
      // The bucket owes 3 tokens at 1 per hour: it admits again after 2 hours.
      same(
        (await bound.evaluate(k, 1, now + 2 * 3_600_000 + 1)).map((v) => v.allowed)[2],
        true,
        'bucket drains the debt',
      )
    },
  })

  cases.push({
    name: 'state expires: a key left alone long enough is fresh again',
    async run() {
      const clock = manualClock(1_700_000_000_000)
      const rules = Object.entries(CONFORMANCE_ALGORITHMS).map(([name, algorithm]) => ({ name, algorithm }))
      const limiter = createLimiter({ rules, store: await options.store(), clock, ...PURE })
      const k = key('expire')
      const fresh = await limiter.peek(k)
      for (let i = 0; i < 3; i++) await limiter.limit(k)
      clock.advance(10_000)
      same(fields(await limiter.peek(k)), fields(fresh), 'after every reset time')
    },
  })

  return cases
}
