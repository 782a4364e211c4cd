import fc from 'fast-check'
import { parseDictionary, parseItem, parseList } from 'structured-headers'
import { describe, expect, it } from 'vitest'
import { fixedWindow, gcra, leakyBucket, slidingWindow, tokenBucket } from '../algorithms.js'
import { createLimiter, type Rule } from '../limiter.js'
import { manualClock } from '../testing/index.js'
import { type HeaderStandard, quotaPolicy, rateLimitHeaders } from './headers.js'
import { PROBLEM_TYPES, problemFor } from './problem.js'

function setup(rules: Rule[]) {
  const clock = manualClock(1_000_000)
  const limiter = createLimiter({ rules, clock })
  const policies = limiter.rules.map(quotaPolicy)
  const headers = (d: Awaited<ReturnType<typeof limiter.limit>>, standards?: HeaderStandard[]) =>
    Object.fromEntries(
      rateLimitHeaders(d, policies, { nowMs: clock.now(), ...(standards ? { standards } : {}) }),
    )
  return { clock, limiter, headers }
}

describe('rate-limit headers', () => {
  it('draft-10: one named member per rule on allowed and denied responses', async () => {
    const { limiter, headers } = setup([
      { name: 'burst', algorithm: tokenBucket({ capacity: 2, refillRate: 1 }) },
      { name: 'daily', algorithm: fixedWindow({ limit: 1000, window: '1d' }) },
    ])
    const ok = headers(await limiter.limit('k'))
    expect(ok).toEqual({
      'RateLimit-Policy': '"burst";q=2;w=2, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=1;t=1, "daily";r=999;t=85400',
    })
    await limiter.limit('k')
    const denied = headers(await limiter.limit('k'))
    expect(denied.RateLimit).toBe('"burst";r=0;t=1, "daily";r=998;t=85400')
    expect(denied['Retry-After']).toBe('1')
    const list = parseList(denied.RateLimit as string)
    expect(list.map(([name, params]) => [name, Object.fromEntries(params)])).toEqual([
      ['burst', { r: 0, t: 1 }],
      ['daily', { r: 998, t: 85400 }],
    ])
  })

  it('draft-7, draft-6 and legacy report the rule closest to exhaustion', async () => {
    const { limiter, headers } = setup([
      { name: 'minute', algorithm: slidingWindow({ limit: 10, window: '1m' }) },
      { name: 'second', algorithm: gcra({ limit: 2, period: '1s' }) },
    ])
    const d = await limiter.limit('k')
    expect(headers(d, ['draft-7', 'draft-6', 'legacy'])).toEqual({
      RateLimit: 'limit=2, remaining=1, reset=1',
      'RateLimit-Policy': '2;w=1',
      'RateLimit-Limit': '2',
      'RateLimit-Remaining': '1',
      'RateLimit-Reset': '1',
      'X-RateLimit-Limit': '2',
      'X-RateLimit-Remaining': '1',
      'X-RateLimit-Reset': String(Math.ceil((1_000_000 + 1000) / 1000)),
    })
    const draft7 = headers(d, ['draft-7'])
    expect(Object.fromEntries(parseDictionary(draft7.RateLimit as string).entries()).remaining).toEqual([
      1,
      new Map(),
    ])
    expect(parseList(draft7['RateLimit-Policy'] as string).map(([q, p]) => [q, p.get('w')])).toEqual([
      [10, 60],
      [2, 1],
    ])
  })

  it('Retry-After is whole seconds rounded up, never 0 while a request cannot pass', async () => {
    const { limiter, headers, clock } = setup([
      { name: 'g', algorithm: gcra({ limit: 1, period: '2500ms' }) },
    ])
    await limiter.limit('k')
    expect(headers(await limiter.limit('k'))['Retry-After']).toBe('3')
    clock.advance(2499)
    expect(headers(await limiter.limit('k'))['Retry-After']).toBe('1')
  })

  it('advertises buckets by the time a drained key takes to be whole again', () => {
    const rule = (name: string, algorithm: Rule['algorithm']) =>
      createLimiter({ rules: [{ name, algorithm }] }).rules
    expect(rule('tb', tokenBucket({ capacity: 20, refillRate: 10 })).map(quotaPolicy)).toEqual([
      { name: 'tb', quota: 20, windowSeconds: 2 },
    ])
    expect(rule('q', leakyBucket({ capacity: 4, leakRate: 1, mode: 'shape' })).map(quotaPolicy)).toEqual([
      { name: 'q', quota: 5, windowSeconds: 5 },
    ])
    expect(rule('g', gcra({ limit: 100, period: '1m', burst: 10 })).map(quotaPolicy)).toEqual([
      { name: 'g', quota: 10, windowSeconds: 6 },
    ])
  })

  it('every header parses with an independent RFC 9651 parser, for random names and values', async () => {
    const printable = fc.string({
      unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 64,
    })
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(printable, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 1, max: 86_400_000 }),
        fc.integer({ min: 0, max: 50 }),
        fc.uint8Array({ minLength: 1, maxLength: 32 }),
        async (names, limit, window, requests, pk) => {
          const clock = manualClock(0)
          const limiter = createLimiter({
            rules: names.map((name, i) => ({
              name,
              algorithm:
                i % 2 === 0
                  ? fixedWindow({ limit, window })
                  : tokenBucket({ capacity: limit, refillRate: 1, refillInterval: window }),
            })),
            clock,
          })
          let d = await limiter.limit('k')
          for (let i = 0; i < requests; i++) d = await limiter.limit('k', { cost: 1 + (i % 3) })
          const policies = limiter.rules.map(quotaPolicy)
          const all = rateLimitHeaders(d, policies, {
            nowMs: clock.now(),
            standards: ['draft-10', 'draft-7', 'draft-6', 'legacy'],
            partitionKey: pk,
          })
          const [policy, current] = all.slice(0, 2).map(([, v]) => parseList(v))
          expect(policy?.map(([n, p]) => [n, p.get('q'), p.get('w')])).toEqual(
            policies.map((p) => [p.name, p.quota, p.windowSeconds]),
          )
          expect(current?.map(([n, p]) => [n, p.get('r')])).toEqual(d.rules.map((r) => [r.name, r.remaining]))
          for (const [, params] of current ?? [])
            expect(new Uint8Array(params.get('pk') as ArrayBuffer)).toEqual(pk)
          const byName = new Map(all.slice(2))
          parseDictionary(byName.get('RateLimit') as string)
          parseList(byName.get('RateLimit-Policy') as string)
          for (const n of [
            'RateLimit-Limit',
            'RateLimit-Remaining',
            'RateLimit-Reset',
            'X-RateLimit-Reset',
          ]) {
            expect(Number.isInteger(parseItem(byName.get(n) as string)[0])).toBe(true)
          }
        },
      ),
      { numRuns: 200 },
    )
  })

  it('rule names outside printable ASCII are rejected at config time', () => {
    for (const name of ['with space', 'tab\t', 'é', '', 'x'.repeat(65), 'new\nline']) {
      expect(() =>
        createLimiter({ rules: [{ name, algorithm: fixedWindow({ limit: 1, window: 1000 }) }] }),
      ).toThrow(/ERR_RULE_NAME/)
    }
  })
})

describe('problem+json', () => {
  it('429 quota-exceeded names the violated policies and the retry time', async () => {
    const clock = manualClock(0)
    const limiter = createLimiter({
      rules: [
        { name: 'burst', algorithm: tokenBucket({ capacity: 1, refillRate: 1, refillInterval: '1500ms' }) },
        { name: 'daily', algorithm: fixedWindow({ limit: 100, window: '1d' }) },
      ],
      clock,
    })
    await limiter.limit('k')
    expect(problemFor(await limiter.limit('k'), '/api/orders')).toEqual({
      type: PROBLEM_TYPES.quotaExceeded,
      title: 'Too Many Requests',
      status: 429,
      detail: 'Rate limit exceeded (burst); retry in 2 s.',
      instance: '/api/orders',
      'violated-policies': ['burst'],
      retryAfter: 2,
    })
    const never = problemFor(await limiter.limit('k', { cost: 5 }), '/x')
    expect(never.retryAfter).toBeUndefined()
    expect(never.detail).toMatch(/can ever admit/)
  })
})
