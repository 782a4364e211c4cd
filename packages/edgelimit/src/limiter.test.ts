import { describe, expect, it } from 'vitest'
import {
  type AlgorithmSpec,
  algorithmSpec,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from './algorithms.js'
import { parseDuration } from './duration.js'
import { ConfigError, EdgelimitError } from './errors.js'
import { type Consistency, createLimiter, type LimiterOptions } from './limiter.js'
import { validateOptions } from './options.js'
import { approximate } from './resilience/approximate.js'
import { remoteDecider } from './resilience/remote.js'
import { memoryStore } from './stores/memory.js'
import type { Store } from './stores/types.js'
import { manualClock } from './testing/index.js'

function issuesOf(options: unknown) {
  try {
    createLimiter(options as LimiterOptions)
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).code).toBe('ERR_EDGELIMIT_CONFIG')
    return (error as ConfigError).issues.map((i) => `${i.path} ${i.code}`)
  }
  throw new Error('expected a ConfigError')
}

describe('durations', () => {
  it.each([
    [500, 500],
    ['500ms', 500],
    ['60s', 60_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['1.5s', 1500],
    [' 2s ', 2000],
    ['1.1s', 1100],
    ['0.001s', 1],
    ['1.50s', 1500],
    ['2.5m', 150_000],
    ['0.00001d', 864],
  ])('%j is %i ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms)
  })
  it.each([
    0,
    -1,
    1.5,
    1.0004,
    '60 sec',
    '1w',
    '',
    's',
    '0s',
    '0.5ms',
    // Not a whole number of ms exactly, however close.
    '1.0004ms',
    '1.9999999ms',
    '0.0005s',
    '0.0000001d',
    '1.0000000000000001ms',
    '1.s',
    '.5s',
    Number.NaN,
    null,
    {},
    '1e3s',
  ])('%j is invalid', (input) => {
    expect(parseDuration(input)).toBeUndefined()
  })
})

describe('option validation', () => {
  it('reports every problem at once, with its path and code', () => {
    const issues = issuesOf({
      rules: [
        { name: 'a', algorithm: fixedWindow({ limit: -1, window: '60 sec' as '60s' }) },
        { name: 'a', algorithm: tokenBucket({ capacity: 0, refillRate: 1.5 }) },
        { name: 'bad name', algorithm: { algorithm: 'magic', options: {} } },
        { name: 'g', algorithm: gcra({ limit: 10, period: 0 }) },
        { name: 'l', algorithm: leakyBucket({ capacity: 1, leakRate: 1, mode: 'drip' as 'shape' }) },
      ],
      clock: { now: 5 },
    })
    expect(issues).toEqual([
      'rules[0].algorithm.limit ERR_INTEGER',
      'rules[0].algorithm.window ERR_DURATION',
      'rules[1].name ERR_DUPLICATE_RULE',
      'rules[1].algorithm.capacity ERR_INTEGER',
      'rules[1].algorithm.refillRate ERR_INTEGER',
      'rules[2].name ERR_RULE_NAME',
      'rules[2].algorithm.algorithm ERR_UNKNOWN_ALGORITHM',
      'rules[3].algorithm.period ERR_DURATION',
      'rules[4].algorithm.mode ERR_CHOICE',
      'clock ERR_CLOCK',
    ])
  })
  it('takes plain specs only through algorithmSpec(), and approximate only as the import', () => {
    const plain = { algorithm: 'gcra', options: { limit: 10, period: '1s' } } as unknown as AlgorithmSpec
    expect(issuesOf({ rules: [{ name: 'g', algorithm: plain }] })).toEqual([
      'rules[0].algorithm.algorithm ERR_UNKNOWN_ALGORITHM',
    ])
    expect(() => createLimiter({ rules: [{ name: 'g', algorithm: plain }] })).toThrow(/algorithmSpec\(\)/)
    const limiter = createLimiter({ rules: [{ name: 'g', algorithm: algorithmSpec(plain) }] })
    expect(limiter.rules[0]?.policy).toEqual({ algorithm: 'gcra', limit: 10, periodMs: 1000, burst: 10 })
    expect(issuesOf({ rules: [{ name: 'x', algorithm: algorithmSpec({ algorithm: 'magic' }) }] })).toEqual([
      'rules[0].algorithm.algorithm ERR_UNKNOWN_ALGORITHM',
    ])
    const rule = { name: 'a', algorithm: fixedWindow({ limit: 5, window: '1m' }) }
    expect(issuesOf({ rules: [{ ...rule, consistency: 'approximate' as unknown as Consistency }] })).toEqual([
      'rules[0].consistency ERR_CHOICE',
    ])
    expect(() => createLimiter({ rules: [{ ...rule, consistency: 'approximate' as never }] })).toThrow(
      /approximate \(imported from edgelimit\)/,
    )
    expect(createLimiter({ rules: [{ ...rule, consistency: approximate }] }).rules[0]?.consistency).toBe(
      'approximate',
    )
  })
  it('refuses a syncInterval on a rule that is not approximate, which would ignore it', () => {
    const rule = {
      name: 'a',
      algorithm: fixedWindow({ limit: 5, window: '1m' }),
      syncInterval: '1s' as const,
    }
    const message = (options: unknown) => {
      try {
        createLimiter(options as LimiterOptions)
      } catch (error) {
        return (error as ConfigError).message
      }
    }
    // Strict by default, strict or local as written: each is listed with every other problem.
    expect(
      issuesOf({
        rules: [
          rule,
          { ...rule, name: 'b', consistency: 'strict' },
          { ...rule, name: 'c', consistency: 'local' },
        ],
        timeout: 0,
      }),
    ).toEqual([
      'rules[0].syncInterval ERR_SYNC_INTERVAL',
      'rules[1].syncInterval ERR_SYNC_INTERVAL',
      'rules[2].syncInterval ERR_SYNC_INTERVAL',
      'timeout ERR_DURATION',
    ])
    expect(message({ rules: [rule] })).toBe(
      'Invalid edgelimit options (1 problem):\n  - rules[0].syncInterval: needs consistency: approximate (imported from edgelimit), or drop it [ERR_SYNC_INTERVAL]',
    )
    // One problem each: a bad interval on a strict rule, and a bad consistency beside an interval.
    expect(issuesOf({ rules: [{ ...rule, syncInterval: '1 sec' }] })).toEqual([
      'rules[0].syncInterval ERR_SYNC_INTERVAL',
    ])
    expect(issuesOf({ rules: [{ ...rule, consistency: 'approximate' }] })).toEqual([
      'rules[0].consistency ERR_CHOICE',
    ])
    // Omitted (or undefined) it is the default, and an approximate rule takes it.
    expect(createLimiter({ rules: [{ ...rule, syncInterval: undefined }] }).rules).toHaveLength(1)
    const store = memoryStore()
    expect(
      validateOptions({ rules: [{ ...rule, consistency: approximate }], store }).rules[0]?.syncIntervalMs,
    ).toBe(1000)
    expect(issuesOf({ rules: [{ ...rule, consistency: approximate, syncInterval: '1 sec' }] })).toEqual([
      'rules[0].syncInterval ERR_DURATION',
    ])
  })
  it("refuses a hand-built definition's policy that the exact arithmetic cannot take, rather than hang", () => {
    // gcd(x, NaN) looped forever inside createLimiter.
    const cases = [
      [gcra, { algorithm: 'gcra', limit: 5, periodMs: Number.NaN, burst: 5 }, 'gcra.periodMs'],
      // 0, which no factory accepts, admitted everything with remaining NaN.
      [gcra, { algorithm: 'gcra', limit: 5, periodMs: 0, burst: 5 }, 'gcra.periodMs'],
      [
        tokenBucket,
        { algorithm: 'token-bucket', capacity: 5, refillRate: 1, refillIntervalMs: 0 },
        'token-bucket.refillIntervalMs',
      ],
      [gcra, { algorithm: 'gcra', limit: Number.POSITIVE_INFINITY, periodMs: 1000, burst: 5 }, 'gcra.limit'],
      [
        tokenBucket,
        { algorithm: 'token-bucket', capacity: 5, refillRate: 1.5, refillIntervalMs: 1000 },
        'token-bucket.refillRate',
      ],
      [
        leakyBucket,
        { algorithm: 'leaky-bucket', mode: 'police', capacity: 5, leakRate: -1, leakIntervalMs: 1000 },
        'leaky-bucket.leakRate',
      ],
    ] as const
    for (const [factory, policy, path] of cases) {
      const { definition } = factory
      const algorithm = {
        algorithm: definition.name,
        options: {},
        definition: { ...definition, options: '', policy: () => policy },
      } as unknown as AlgorithmSpec
      let error: unknown
      try {
        createLimiter({ rules: [{ name: 'a', algorithm }] })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).issues.map((i) => `${i.path} ${i.code}`)).toEqual([`${path} ERR_INTEGER`])
    }
  })
  it('reports every option name it does not know, with its path and the names it knows', () => {
    // Rules read from JSON or YAML: no type checker sees these names.
    const rules = JSON.parse(`[
      { "name": "u", "algorithm": { "algorithm": "token-bucket",
          "options": { "capacity": 2, "refillRate": 1, "refillinterval": "1m" } } },
      { "name": "q", "algorithm": { "algorithm": "leaky-bucket",
          "options": { "capacity": 2, "leakRate": 1, "shape": true } } },
      { "name": "g", "algorithm": { "algorithm": "gcra", "options": { "limit": 1, "period": "1s", "brust": 2 } },
        "onStoreErorr": "open", "syncinterval": "1s" },
      { "name": "w", "algorithm": { "algorithm": "sliding-window", "options": { "limit": 1, "window": "1s" } } }
    ]`).map((r: { algorithm: { algorithm: string } }) => ({ ...r, algorithm: algorithmSpec(r.algorithm) }))
    expect(
      issuesOf({ rules, timout: '1s', denycache: false, breaker: { openms: 5 }, denyCache: { maxkeys: 5 } }),
    ).toEqual([
      'timout ERR_UNKNOWN_OPTION',
      'denycache ERR_UNKNOWN_OPTION',
      'rules[0].algorithm.refillinterval ERR_UNKNOWN_OPTION',
      'rules[1].algorithm.shape ERR_UNKNOWN_OPTION',
      'rules[2].onStoreErorr ERR_UNKNOWN_OPTION',
      'rules[2].syncinterval ERR_UNKNOWN_OPTION',
      'rules[2].algorithm.brust ERR_UNKNOWN_OPTION',
      'breaker.openms ERR_UNKNOWN_OPTION',
      'denyCache.maxkeys ERR_UNKNOWN_OPTION',
    ])
    const message = (options: unknown) => {
      try {
        createLimiter(options as LimiterOptions)
      } catch (error) {
        return (error as ConfigError).issues.map((i) => i.message)
      }
    }
    expect(message({ rules: [rules[0]] })).toEqual([
      'expected one of capacity, refillRate, refillInterval, got "refillinterval" (string)',
    ])
    expect(message({ rules: [rules[1]] })).toEqual([
      'expected one of capacity, leakRate, leakInterval, mode, got "shape" (string)',
    ])
    expect(() => createLimiter({ rules: [rules[3]], timout: '1s' } as LimiterOptions)).toThrow(
      'timout: expected one of rules, store, clock, timeout, breaker, denyCache, onEvent, got "timout" (string) [ERR_UNKNOWN_OPTION]',
    )
    // Every option the types declare is known, and undefined is an omitted option.
    const all: LimiterOptions = {
      rules: [
        {
          name: 'a',
          algorithm: leakyBucket({ capacity: 1, leakRate: 1, leakInterval: '1s', mode: 'shape' }),
          onStoreError: 'open',
          mode: 'shadow',
          enforce: 50,
          consistency: 'strict',
        },
        {
          name: 'b',
          algorithm: tokenBucket({ capacity: 1, refillRate: 1, refillInterval: '1s' }),
          consistency: approximate,
          syncInterval: '1s',
        },
        { name: 'c', algorithm: gcra({ limit: 1, period: '1s', burst: 2 }) },
        { name: 'd', algorithm: fixedWindow({ limit: 1, window: '1s' }) },
      ],
      store: undefined,
      clock: manualClock(0),
      timeout: '1s',
      breaker: { failureRatio: 1, sampleSize: 2, minimumCalls: 1, openMs: 5 },
      denyCache: { maxKeys: 1 },
      onEvent: () => {},
    }
    expect(createLimiter(all).rules).toHaveLength(4)
  })
  it('reports a bad breaker with the problems after it, and a denyCache that is not an object', () => {
    const rules = [{ name: 'a', algorithm: fixedWindow({ limit: 5, window: '1m' }) }]
    expect(issuesOf({ rules, breaker: 5, denyCache: { maxKeys: -1 }, onEvent: 3 })).toEqual([
      'breaker ERR_OBJECT',
      'denyCache.maxKeys ERR_INTEGER',
      'onEvent ERR_FUNCTION',
    ])
    for (const denyCache of ['yes', true, 5, []]) {
      expect(issuesOf({ rules, denyCache }), String(denyCache)).toEqual(['denyCache ERR_OBJECT'])
    }
    expect(createLimiter({ rules, denyCache: false }).rules).toHaveLength(1)
    expect(createLimiter({ rules, denyCache: {} }).rules).toHaveLength(1)
  })
  it('validates the breaker options, reporting each with its path and code', () => {
    const rules = [{ name: 'a', algorithm: fixedWindow({ limit: 5, window: '1m' }) }]
    const breakerIssues = (breaker: unknown) => issuesOf({ rules, breaker })
    expect(breakerIssues({ failureRatio: 0, sampleSize: -1, minimumCalls: 0.5, openMs: '5 sec' })).toEqual([
      'breaker.failureRatio ERR_RATIO',
      'breaker.sampleSize ERR_INTEGER',
      'breaker.minimumCalls ERR_INTEGER',
      'breaker.openMs ERR_DURATION',
    ])
    expect(breakerIssues({ failureRatio: '0.5', sampleSize: '20', minimumCalls: true, openMs: -5 })).toEqual([
      'breaker.failureRatio ERR_RATIO',
      'breaker.sampleSize ERR_INTEGER',
      'breaker.minimumCalls ERR_INTEGER',
      'breaker.openMs ERR_DURATION',
    ])
    for (const failureRatio of [1.01, Number.NaN, -0.5]) {
      expect(breakerIssues({ failureRatio }), String(failureRatio)).toEqual([
        'breaker.failureRatio ERR_RATIO',
      ])
    }
    expect(breakerIssues({ sampleSize: 10_001 })).toEqual(['breaker.sampleSize ERR_INTEGER'])
    // A minimum above the sample could never be reached: the breaker would never open.
    expect(breakerIssues({ sampleSize: 5, minimumCalls: 6 })).toEqual(['breaker.minimumCalls ERR_INTEGER'])
    expect(() => createLimiter({ rules, breaker: { sampleSize: 5, minimumCalls: 6 } })).toThrow(
      'breaker.minimumCalls: expected a positive integer up to 5, got 6 (number) [ERR_INTEGER]',
    )
    expect(() => createLimiter({ rules, breaker: { failureRatio: 0 } })).toThrow(
      'breaker.failureRatio: expected a number above 0, at most 1, got 0 (number) [ERR_RATIO]',
    )
  })
  it('hands the breaker its options validated: defaults filled in, openMs in milliseconds', () => {
    const rules = [{ name: 'a', algorithm: fixedWindow({ limit: 5, window: '1m' }) }]
    const breakerOf = (breaker: LimiterOptions['breaker']) => validateOptions({ rules, breaker }).breaker
    expect(breakerOf(undefined)).toEqual({
      failureRatio: 0.5,
      sampleSize: 20,
      minimumCalls: 10,
      openMs: 1000,
    })
    expect(breakerOf({ openMs: '5s', failureRatio: 1 })).toEqual({
      failureRatio: 1,
      sampleSize: 20,
      minimumCalls: 10,
      openMs: 5000,
    })
    // minimumCalls defaults to 10, or to the whole sample when it is smaller.
    expect(breakerOf({ sampleSize: 4, openMs: 250 })).toEqual({
      failureRatio: 0.5,
      sampleSize: 4,
      minimumCalls: 4,
      openMs: 250,
    })
    expect(breakerOf({ sampleSize: 1, minimumCalls: 1 })?.minimumCalls).toBe(1)
    expect(breakerOf(false)).toBeUndefined()
  })
  it('reports an omitted GCRA burst under limit only (burst defaults to the limit)', () => {
    expect(issuesOf({ rules: [{ name: 'g', algorithm: gcra({ limit: 0, period: '1s' }) }] })).toEqual([
      'rules[0].algorithm.limit ERR_INTEGER',
    ])
    expect(
      issuesOf({ rules: [{ name: 'g', algorithm: gcra({ limit: 0, period: '1s', burst: 0 }) }] }),
    ).toEqual(['rules[0].algorithm.limit ERR_INTEGER', 'rules[0].algorithm.burst ERR_INTEGER'])
    expect(
      createLimiter({ rules: [{ name: 'g', algorithm: gcra({ limit: 3, period: '1s' }) }] }).rules[0]?.policy,
    ).toEqual({ algorithm: 'gcra', limit: 3, periodMs: 1000, burst: 3 })
  })
  it('rejects empty or missing rules and a bad store', () => {
    expect(issuesOf({ rules: [] })).toEqual(['rules ERR_EMPTY_RULES'])
    expect(issuesOf({})).toEqual(['rules ERR_EMPTY_RULES'])
    expect(issuesOf(null)).toEqual(['options ERR_OBJECT'])
    expect(issuesOf({ rules: [null], store: 'redis' })).toEqual(['rules[0] ERR_OBJECT', 'store ERR_STORE'])
  })
  it('names the offending value in the message', () => {
    expect(() =>
      createLimiter({
        rules: [{ name: 'w', algorithm: slidingWindow({ limit: 5, window: '60 sec' as '60s' }) }],
      }),
    ).toThrow(
      'rules[0].algorithm.window: expected a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to 31622400000, got "60 sec" (string) [ERR_DURATION]',
    )
  })
  it('refuses policies whose arithmetic would leave the exact range', () => {
    expect(
      issuesOf({
        rules: [{ name: 'x', algorithm: slidingWindow({ limit: 2_000_000_000, window: '300d' }) }],
      }),
    ).toEqual(['rules[0].algorithm.limit ERR_RANGE'])
  })
  it('takes a fixed window or a log whose limit × window passes the exact bound: they add counts, never multiply one by a time', () => {
    // 1,000,000 per 30 days: limit × window is 2.6e15, above the bound only the sliding counter needs.
    for (const algorithm of [fixedWindow, slidingLog]) {
      const clock = manualClock(0)
      const limiter = createLimiter({
        rules: [{ name: 'monthly', algorithm: algorithm({ limit: 1_000_000, window: '30d' }) }],
        clock,
      })
      expect(limiter.limitSync('k', { cost: 999_999 }).remaining).toBe(1)
      clock.set(1000)
      expect(limiter.limitSync('k')).toMatchObject({ allowed: true, remaining: 0 })
      expect(limiter.limitSync('k')).toMatchObject({ allowed: false, retryAfterMs: 30 * 86_400_000 - 1000 })
      clock.set(30 * 86_400_000)
      expect(limiter.limitSync('k', { cost: 1_000_000 }).allowed).toBe(algorithm === fixedWindow)
    }
    const big = (algorithm: typeof fixedWindow) => () =>
      createLimiter({
        rules: [{ name: 'x', algorithm: algorithm({ limit: 2_000_000_000, window: '366d' }) }],
      })
    expect(big(fixedWindow)).not.toThrow()
    expect(big(slidingLog)).not.toThrow()
  })
})

describe('calls', () => {
  const limiter = createLimiter({
    rules: [{ name: 'r', algorithm: fixedWindow({ limit: 2, window: '1s' }) }],
  })
  it('rejects bad costs and keys with a code, never a crash', async () => {
    for (const cost of [-1, 1.5, Number.NaN, '1' as unknown as number]) {
      await expect(limiter.limit('k', { cost })).rejects.toMatchObject({ code: 'ERR_EDGELIMIT_COST' })
      expect(() => limiter.limitSync('k', { cost })).toThrow(EdgelimitError)
    }
    await expect(limiter.limit(42 as unknown as string)).rejects.toMatchObject({ code: 'ERR_EDGELIMIT_KEY' })
  })
  it('rejects options that are not an object (`limit(k, 5)` is not a cost of 5) and charges nothing', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: fixedWindow({ limit: 2, window: '1s' }) }],
      // Stands still: on the system clock a second's end between the last two calls refilled it.
      clock: manualClock(0),
    })
    for (const opts of [5, 'x', true]) {
      await expect(limiter.limit('k', opts as never)).rejects.toMatchObject({
        code: 'ERR_EDGELIMIT_COST',
        message: expect.stringMatching(/^Expected `options` to be an object, got /),
      })
      expect(() => limiter.limitSync('k', opts as never)).toThrow(/Expected `options` to be an object/)
    }
    expect(limiter.limitSync('k', {}).remaining).toBe(1)
    expect(limiter.limitSync('k').remaining).toBe(0)
  })
  it('rejects a clock reading that is not integer ms ≥ 0 with a code, on every decision path', async () => {
    const rules = [{ name: 'r', algorithm: gcra({ limit: 2, period: '1s' }) }]
    const remote: Store = {
      name: 'remote',
      bind: () => ({ evaluate: async () => [], reset: async () => {} }),
      decider: remoteDecider,
    }
    for (const reading of [Number.NaN, undefined, -5000, 1000.5, Number.POSITIVE_INFINITY, 2 ** 53, '1000']) {
      const clock = { now: () => reading as number }
      const code = { code: 'ERR_EDGELIMIT_CLOCK' }
      const local = createLimiter({ rules, clock })
      expect(() => local.limitSync('k'), String(reading)).toThrow(expect.objectContaining(code))
      await expect(local.limit('k')).rejects.toBeInstanceOf(EdgelimitError)
      await expect(local.peek('k')).rejects.toMatchObject(code)
      // The general in-process path (observers) and a remote store's path read the same checked clock.
      const observed = createLimiter({ rules, clock, onEvent: () => {} })
      expect(() => observed.limitSync('k')).toThrow(expect.objectContaining(code))
      await expect(createLimiter({ rules, clock, store: remote }).limit('k')).rejects.toMatchObject(code)
    }
    const fine = createLimiter({ rules, clock: { now: () => 0 } })
    expect(fine.limitSync('k').allowed).toBe(true)
  })
  it('limitSync needs a synchronous store', () => {
    const asyncOnly: Store = {
      name: 'remote',
      bind: () => ({ evaluate: async () => [], reset: async () => {} }),
      decider: remoteDecider,
    }
    const remote = createLimiter({
      rules: [{ name: 'r', algorithm: fixedWindow({ limit: 2, window: '1s' }) }],
      store: asyncOnly,
    })
    expect(() => remote.limitSync('k')).toThrow(
      expect.objectContaining({ code: 'ERR_EDGELIMIT_SYNC_UNSUPPORTED' }),
    )
  })
  it("a hand-written decider's report(key, cost, decision, source) emits what docs/resilience.md says", async () => {
    const inner = memoryStore()
    const seen: string[] = []
    const plain: Store = {
      name: 'plain',
      bind(rules) {
        const bound = inner.bind(rules)
        return { evaluate: (...args) => bound.evaluate(...args), reset: (key) => bound.reset(key) }
      },
      decider: ({ bound, clock, build, shadowOf, report }) => ({
        async decide(key, cost) {
          const shadow = shadowOf(key)
          const verdicts = await bound.evaluate(key, cost, clock.now(), { shadow })
          const decision = build(verdicts, shadow)
          // Returned unchanged.
          expect(report(key, cost, decision, 'store')).toBe(decision)
          return decision
        },
        reset: (key) => bound.reset(key),
        flush: async () => {},
      }),
    }
    const limiter = createLimiter({
      rules: [
        { name: 'r', algorithm: fixedWindow({ limit: 2, window: '1m' }) },
        { name: 's', algorithm: fixedWindow({ limit: 1, window: '1m' }), mode: 'shadow' },
      ],
      clock: manualClock(0),
      store: plain,
      onEvent: (e) =>
        seen.push(
          e.type === 'decision'
            ? `decision ${e.key} cost=${e.cost} ${e.source} ${e.decision.allowed}`
            : e.type === 'shadow-deny'
              ? `shadow-deny ${e.rule}`
              : e.type,
        ),
    })
    await limiter.limit('k', { cost: 2 })
    await limiter.peek('k')
    expect(seen).toEqual([
      'decision k cost=2 store true',
      // The shadow rule denied the cost-2 request: observed, not enforced.
      'shadow-deny s',
      // A peek: cost 0, charges nothing (nor did the shadow rule's denial).
      'decision k cost=0 store true',
    ])
  })
  it('an async store without a decider is refused when the limiter is created, with a code that says what to add', () => {
    const bare: Store = {
      name: 'bare',
      bind: () => ({ evaluate: async () => [], reset: async () => {} }),
    }
    expect(() =>
      createLimiter({
        rules: [{ name: 'r', algorithm: fixedWindow({ limit: 2, window: '1s' }) }],
        store: bare,
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'ERR_EDGELIMIT_STORE',
        message: expect.stringContaining('decider: remoteDecider'),
      }),
    )
  })
})

describe('the in-process fast path', () => {
  it('decides exactly as the general path (one rule, no rollout, no observers)', async () => {
    const specs = [
      fixedWindow({ limit: 5, window: '1s' }),
      slidingWindow({ limit: 5, window: '1s' }),
      tokenBucket({ capacity: 5, refillRate: 3 }),
      leakyBucket({ capacity: 3, leakRate: 2, mode: 'shape' }),
      leakyBucket({ capacity: 3, leakRate: 2 }),
      gcra({ limit: 4, period: '1s', burst: 2 }),
    ]
    for (const algorithm of specs) {
      const clock = manualClock(1_000_000)
      const rules = [{ name: 'r', algorithm }]
      const fast = createLimiter({ rules, clock })
      // An observer takes the general path (shadow masks, reporting); it must change nothing.
      const general = createLimiter({ rules, clock, onEvent: () => {} })
      for (let i = 0; i < 300; i++) {
        clock.advance((i * 37) % 211)
        const key = `k${i % 3}`
        const cost = i % 7 === 0 ? 0 : 1 + (i % 3)
        const a = i % 2 === 0 ? fast.limitSync(key, { cost }) : await fast.limit(key, { cost })
        expect(a, `${algorithm.algorithm} step ${i}`).toEqual(general.limitSync(key, { cost }))
      }
    }
  })
})

describe('decisions', () => {
  it('carries every field, per rule and overall', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [
        { name: 'burst', algorithm: tokenBucket({ capacity: 2, refillRate: 1 }) },
        { name: 'minute', algorithm: fixedWindow({ limit: 10, window: '1m' }) },
      ],
      clock,
    })
    const first = await limiter.limit('k')
    expect(first).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      resetAfterMs: 1000,
      retryAfterMs: 0,
      delayMs: undefined,
      reason: undefined,
      rules: [
        {
          name: 'burst',
          allowed: true,
          shadow: false,
          limit: 2,
          remaining: 1,
          resetAfterMs: 1000,
          retryAfterMs: 0,
        },
        {
          name: 'minute',
          allowed: true,
          shadow: false,
          limit: 10,
          remaining: 9,
          resetAfterMs: 60_000,
          retryAfterMs: 0,
        },
      ],
    })
    await limiter.limit('k')
    const denied = await limiter.limit('k')
    expect(denied).toMatchObject({
      allowed: false,
      limit: 2,
      remaining: 0,
      retryAfterMs: 1000,
      reason: 'limit-exceeded',
    })
    expect(denied.rules[1]).toMatchObject({ allowed: true, remaining: 8 })
  })
  it('reports the shaping delay to hold the request for', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [{ name: 'queue', algorithm: leakyBucket({ capacity: 5, leakRate: 10, mode: 'shape' }) }],
      clock,
    })
    const delays = []
    for (let i = 0; i < 4; i++) delays.push(limiter.limitSync('k').delayMs)
    expect(delays).toEqual([0, 100, 200, 300])
    clock.advance(150)
    expect(limiter.limitSync('k').delayMs).toBe(250)
  })
  it('a denied request is a value, and the default store and clock work', async () => {
    const limiter = createLimiter({ rules: [{ name: 'one', algorithm: gcra({ limit: 1, period: '1h' }) }] })
    expect((await limiter.limit('x')).allowed).toBe(true)
    const d = await limiter.limit('x')
    expect(d.allowed).toBe(false)
    expect(d.retryAfterMs).toBeGreaterThan(3_590_000)
  })
})

describe('observers', () => {
  it('an observer that throws or rejects changes no decision and leaves no unhandled rejection', async () => {
    // An async onEvent (an EventSink returns void, so an async function fits) that rejected left
    // its promise unhandled: Node ended the process with exit code 1.
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const clock = manualClock(1_000_000)
      const rules = [{ name: 'r', algorithm: fixedWindow({ limit: 2, window: '1m' }) }]
      const plain = createLimiter({ rules, clock })
      const observed = createLimiter({
        rules,
        clock,
        onEvent: [
          async () => {
            throw new Error('log backend down')
          },
          () => {
            throw new Error('sync observer down')
          },
        ],
      })
      for (let i = 0; i < 4; i++) expect(await observed.limit('k')).toEqual(await plain.limit('k'))
      expect(observed.limitSync('k')).toEqual(plain.limitSync('k'))
      // Node reports an unhandled rejection once the microtask queue has drained.
      await new Promise((resolve) => setImmediate(resolve))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })
})
