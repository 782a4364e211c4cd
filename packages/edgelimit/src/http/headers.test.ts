import fc from 'fast-check'
import { parseDictionary, parseItem, parseList } from 'structured-headers'
import { describe, expect, it } from 'vitest'
import { issuesOf } from '../../test/support/config-issues.js'
import { fixedWindow, gcra, leakyBucket, slidingWindow, tokenBucket } from '../algorithms.js'
import { bindingRule, createLimiter, type Decision, type Rule, type RuleDecision } from '../limiter.js'
import { remoteDecider } from '../resilience/remote.js'
import type { Store } from '../stores/types.js'
import { manualClock } from '../testing/index.js'
import {
  type HeaderOptions,
  type HeaderStandard,
  headerRenderer,
  type QuotaPolicy,
  quotaPolicy,
  rateLimitHeaders,
  sfBinary,
  sfString,
} from './headers.js'
import { PROBLEM_TYPES, problemFor } from './problem.js'

/** The first implementation of `rateLimitHeaders`, kept as the reference the renderer must match. */
function referenceHeaders(
  decision: Decision,
  policies: readonly QuotaPolicy[],
  options: HeaderOptions,
): [string, string][] {
  const out: [string, string][] = []
  const standards = options.standards ?? ['draft-10']
  const bind = bindingRule(decision.rules, decision.allowed)
  const top = decision.rules[bind] as RuleDecision
  const topPolicy = policies[bind] as QuotaPolicy
  for (const standard of standards) {
    switch (standard) {
      case 'draft-10': {
        const pk = options.partitionKey ? `;pk=${sfBinary(options.partitionKey)}` : ''
        // Known and enforced; only observing (shadow, state known); the rest: state not known.
        const known = decision.rules.some((r) => !r.shadow)
        const observes = (r: RuleDecision | undefined) => r?.shadow === true && r.unknown !== true
        const enforced = decision.rules.some((r) => !observes(r))
        out.push([
          'ratelimit-policy',
          policies
            // A rule whose state is not known keeps its policy.
            .filter((_, i) => !(enforced && observes(decision.rules[i])))
            .map((p) => `${sfString(p.name)};q=${p.quota};w=${p.windowSeconds}${pk}`)
            .join(', '),
        ])
        // Members: the known rules; else the unknown ones; else (all observe) every rule.
        const shown = known
          ? decision.rules.filter((r) => !r.shadow)
          : enforced
            ? decision.rules.filter((r) => !observes(r))
            : decision.rules
        out.push([
          'ratelimit',
          shown.map((r) => `${sfString(r.name)};r=${r.remaining};t=${until(r)}${pk}`).join(', '),
        ])
        break
      }
      case 'draft-7':
        out.push(['ratelimit', `limit=${top.limit}, remaining=${top.remaining}, reset=${until(top)}`])
        out.push(['ratelimit-policy', `${topPolicy.quota};w=${topPolicy.windowSeconds}`])
        break
      case 'draft-6':
        out.push(['ratelimit-limit', String(top.limit)])
        out.push(['ratelimit-remaining', String(top.remaining)])
        out.push(['ratelimit-reset', String(until(top))])
        out.push(['ratelimit-policy', `${topPolicy.quota};w=${topPolicy.windowSeconds}`])
        break
      case 'legacy':
        out.push(['x-ratelimit-limit', String(top.limit)])
        out.push(['x-ratelimit-remaining', String(top.remaining)])
        out.push(['x-ratelimit-reset', String(Math.ceil((options.nowMs + untilMs(top)) / 1000))])
        break
    }
  }
  if (!decision.allowed && Number.isFinite(decision.retryAfterMs)) {
    out.push(['retry-after', String(Math.max(1, ceil(decision.retryAfterMs)))])
  }
  return out
}

const ceil = (ms: number) => Math.ceil(ms / 1000)
function untilMs(rule: RuleDecision): number {
  return !rule.allowed && Number.isFinite(rule.retryAfterMs) ? rule.retryAfterMs : rule.resetAfterMs
}
function until(rule: RuleDecision): number {
  return ceil(untilMs(rule))
}

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
      'ratelimit-policy': '"burst";q=2;w=2, "daily";q=1000;w=86400',
      ratelimit: '"burst";r=1;t=1, "daily";r=999;t=85400',
    })
    await limiter.limit('k')
    const denied = headers(await limiter.limit('k'))
    expect(denied.ratelimit).toBe('"burst";r=0;t=1, "daily";r=998;t=85400')
    expect(denied['retry-after']).toBe('1')
    const list = parseList(denied.ratelimit as string)
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
      ratelimit: 'limit=2, remaining=1, reset=1',
      'ratelimit-policy': '2;w=1',
      'ratelimit-limit': '2',
      'ratelimit-remaining': '1',
      'ratelimit-reset': '1',
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': '1',
      'x-ratelimit-reset': String(Math.ceil((1_000_000 + 1000) / 1000)),
    })
    const draft7 = headers(d, ['draft-7'])
    expect(Object.fromEntries(parseDictionary(draft7.ratelimit as string).entries()).remaining).toEqual([
      1,
      new Map(),
    ])
    expect(parseList(draft7['ratelimit-policy'] as string).map(([q, p]) => [q, p.get('w')])).toEqual([[2, 1]])
  })

  it('draft-7 RateLimit-Policy names one policy, the binding one: never two of the same quota (draft-7 §3.5)', async () => {
    const { limiter, headers } = setup([
      { name: 'second', algorithm: fixedWindow({ limit: 10, window: '1s' }) },
      { name: 'minute', algorithm: fixedWindow({ limit: 10, window: '1m' }) },
    ])
    // `10;w=1, 10;w=60` is draft-7's own example of an invalid field.
    expect(headers(await limiter.limit('k'), ['draft-7'])).toEqual({
      ratelimit: 'limit=10, remaining=9, reset=1',
      'ratelimit-policy': '10;w=1',
    })
    for (let i = 0; i < 9; i++) await limiter.limit('k')
    // Both deny; the minute's window (ending 20 s from now) keeps the request out longest.
    const denied = headers(await limiter.limit('k'), ['draft-7'])
    expect([denied.ratelimit, denied['ratelimit-policy'], denied['retry-after']]).toEqual([
      'limit=10, remaining=0, reset=20',
      '10;w=60',
      '20',
    ])
  })

  it('legacy X-RateLimit-Reset rounds the absolute reset time up once, as Retry-After points at it', async () => {
    const clock = manualClock(1_000_500)
    const limiter = createLimiter({
      rules: [{ name: 'a', algorithm: fixedWindow({ limit: 2, window: '10s' }) }],
      clock,
    })
    const headers = async () =>
      Object.fromEntries(
        rateLimitHeaders(await limiter.limit('k'), limiter.rules.map(quotaPolicy), {
          nowMs: clock.now(),
          standards: ['draft-6', 'legacy'],
        }),
      )
    // The window ends at 1,010,000 ms: 9.5 s away, which draft-6 rounds up to 10.
    expect(await headers()).toMatchObject({ 'ratelimit-reset': '10', 'x-ratelimit-reset': '1010' })
    await limiter.limit('k')
    const denied = await headers()
    expect([denied['retry-after'], denied['x-ratelimit-reset']]).toEqual(['10', '1010'])
  })

  it('a standard listed twice is rendered once', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'a', algorithm: fixedWindow({ limit: 1, window: '10s' }) }],
      clock: manualClock(0),
    })
    const policies = limiter.rules.map(quotaPolicy)
    for (const decision of [await limiter.limit('k'), await limiter.limit('k')]) {
      expect(
        rateLimitHeaders(decision, policies, {
          nowMs: 0,
          standards: ['legacy', 'draft-10', 'legacy', 'draft-10'],
        }),
      ).toEqual(rateLimitHeaders(decision, policies, { nowMs: 0, standards: ['legacy', 'draft-10'] }))
    }
  })

  it('Retry-After is whole seconds rounded up, never 0 while a request cannot pass', async () => {
    const { limiter, headers, clock } = setup([
      { name: 'g', algorithm: gcra({ limit: 1, period: '2500ms' }) },
    ])
    await limiter.limit('k')
    expect(headers(await limiter.limit('k'))['retry-after']).toBe('3')
    clock.advance(2499)
    expect(headers(await limiter.limit('k'))['retry-after']).toBe('1')
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
          parseDictionary(byName.get('ratelimit') as string)
          parseList(byName.get('ratelimit-policy') as string)
          for (const n of [
            'ratelimit-limit',
            'ratelimit-remaining',
            'ratelimit-reset',
            'x-ratelimit-reset',
          ]) {
            expect(Number.isInteger(parseItem(byName.get(n) as string)[0])).toBe(true)
          }
        },
      ),
      { numRuns: 200 },
    )
  })

  it('rateLimitHeaders and headerRenderer render exactly what the reference does, for every standard (property)', async () => {
    const standardSets: HeaderStandard[][] = [
      ['draft-10'],
      ['draft-7'],
      ['draft-6'],
      ['legacy'],
      ['draft-10', 'legacy'],
      ['legacy', 'draft-7'],
      ['draft-6', 'legacy'],
      [],
    ]
    const printable = fc.string({
      unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 64,
    })
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(printable, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 1_000 }),
        fc.integer({ min: 1, max: 86_400_000 }),
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 30 }),
        fc.option(fc.uint8Array({ minLength: 1, maxLength: 16 }), { nil: undefined }),
        fc.constantFrom(...standardSets),
        fc.integer({ min: 0, max: 2 ** 41 }),
        fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
        async (names, limit, window, costs, pk, standards, nowMs, shadows) => {
          const clock = manualClock(nowMs)
          const limiter = createLimiter({
            rules: names.map((name, i) => ({
              name,
              mode: shadows[i] ? 'shadow' : 'enforce',
              algorithm:
                i % 3 === 0
                  ? fixedWindow({ limit, window })
                  : i % 3 === 1
                    ? tokenBucket({ capacity: limit, refillRate: 1, refillInterval: window })
                    : gcra({ limit, period: window }),
            })),
            clock,
          })
          const policies = limiter.rules.map(quotaPolicy)
          const render = headerRenderer(policies, standards)
          const pkText = pk === undefined ? '' : `;pk=${sfBinary(pk)}`
          for (const cost of [1, ...costs]) {
            const d = await limiter.limit('k', { cost })
            const options = { nowMs, standards, ...(pk === undefined ? {} : { partitionKey: pk }) }
            const expected = referenceHeaders(d, policies, options)
            expect(render(d, nowMs, pkText)).toEqual(expected)
            expect(rateLimitHeaders(d, policies, options)).toEqual(expected)
            clock.advance(Math.floor(window / 7))
          }
        },
      ),
      { numRuns: 200 },
    )
  })

  it('rateLimitHeaders takes one standard by name, as createRateLimit does, and refuses a name it does not render', async () => {
    const { limiter } = setup([{ name: 'api', algorithm: fixedWindow({ limit: 2, window: '1m' }) }])
    const d = await limiter.limit('k')
    const policies = limiter.rules.map(quotaPolicy)
    // A name, not a list: draft-7's two fields, once (they were draft-6's four, once per character).
    expect(rateLimitHeaders(d, policies, { standards: 'draft-7', nowMs: 0 })).toEqual(
      rateLimitHeaders(d, policies, { standards: ['draft-7'], nowMs: 0 }),
    )
    // A name it does not know rendered draft-6's fields; now a ConfigError naming the choices.
    for (const standards of [['Draft-10'], ['draft-10', 'draft-9'], 'x-ratelimit'] as never[])
      expect(issuesOf(() => rateLimitHeaders(d, policies, { standards, nowMs: 0 }))).toEqual({
        standards: ['ERR_HEADER_STANDARD'],
      })
    // The legacy reset is an epoch time: without nowMs it read NaN.
    expect(issuesOf(() => rateLimitHeaders(d, policies, { standards: ['legacy'] } as never))).toEqual({
      nowMs: ['ERR_INTEGER'],
    })
    expect(Object.fromEntries(rateLimitHeaders(d, policies, { nowMs: Number.NaN }))).toHaveProperty(
      'ratelimit',
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

  it('a request that can never pass names only the rules it costs too much for, beside the others that deny', async () => {
    const { limiter } = setup([
      { name: 'hourly', algorithm: fixedWindow({ limit: 10, window: '1h' }) },
      { name: 'burst', algorithm: fixedWindow({ limit: 2, window: '1m' }) },
    ])
    await limiter.limit('k')
    // Cost 10: hourly has 9 left (it admits 10 in the next hour); burst can never admit 10.
    const denied = await limiter.limit('k', { cost: 10 })
    expect(denied.rules.map((r) => [r.name, r.reason])).toEqual([
      ['hourly', 'limit-exceeded'],
      ['burst', 'cost-exceeds-limit'],
    ])
    const problem = problemFor(denied, '/x')
    expect(problem['violated-policies']).toEqual(['hourly', 'burst'])
    expect(problem.detail).toBe('This request costs more than burst can ever admit.')
    expect(problem.retryAfter).toBeUndefined()
  })

  it('a rule in shadow is not a violated policy: it does not block', async () => {
    const { limiter } = setup([
      { name: 'enforced', algorithm: gcra({ limit: 1, period: '1h', burst: 2 }) },
      { name: 'observe', algorithm: gcra({ limit: 1, period: '1h', burst: 1 }), mode: 'shadow' },
    ])
    await limiter.limit('k')
    await limiter.limit('k')
    const denied = await limiter.limit('k')
    expect([denied.allowed, denied.rules.map((r) => r.allowed)]).toEqual([false, [false, false]])
    const problem = problemFor(denied, '/x')
    expect(problem['violated-policies']).toEqual(['enforced'])
    expect(problem.detail).toBe('Rate limit exceeded (enforced); retry in 3600 s.')
  })

  it('a rule in shadow is not in the RateLimit field, as it is not the binding rule of the others', async () => {
    const rules: Rule[] = [
      { name: 'observe', algorithm: gcra({ limit: 1, period: '1h', burst: 1 }), mode: 'shadow' },
      { name: 'enforced', algorithm: gcra({ limit: 1, period: '1h', burst: 3 }) },
    ]
    const { limiter } = setup(rules)
    const policies = limiter.rules.map(quotaPolicy)
    const standards: HeaderStandard[] = ['draft-10', 'draft-7']
    await limiter.limit('k')
    // The shadow rule is exhausted and would deny; the client is told only of the enforced one.
    const d = await limiter.limit('k')
    expect(d.rules.map((r) => [r.name, r.allowed, r.shadow])).toEqual([
      ['observe', false, true],
      ['enforced', true, false],
    ])
    const fields = Object.fromEntries(rateLimitHeaders(d, policies, { standards: ['draft-10'], nowMs: 0 }))
    expect(fields.ratelimit).toBe('"enforced";r=1;t=7200')
    // Nor in the policy field: a client pacing itself by it would follow a rule that never blocks.
    expect(fields['ratelimit-policy']).toBe('"enforced";q=3;w=10800')
    const draft7 = rateLimitHeaders(d, policies, { standards: ['draft-7'], nowMs: 0 })
    expect(draft7[0]).toEqual(['ratelimit', 'limit=3, remaining=1, reset=7200'])
    expect(headerRenderer(policies, standards)(d, 0, '')).toEqual(
      referenceHeaders(d, policies, { standards, nowMs: 0 }),
    )
    // A limiter whose every rule observes shows them all, as its decision's fields do.
    const onlyShadow = setup([rules[0] as Rule]).limiter
    const s = await onlyShadow.limit('k')
    expect(Object.fromEntries(rateLimitHeaders(s, onlyShadow.rules.map(quotaPolicy), { nowMs: 0 }))).toEqual({
      'ratelimit-policy': '"observe";q=1;w=3600',
      ratelimit: '"observe";r=0;t=3600',
    })
  })

  it('a rule whose state is not known (not asked, failing open) keeps its policy, without a RateLimit member', () => {
    const part = (name: string, remaining: number, extra: Partial<RuleDecision> = {}): RuleDecision => ({
      name,
      allowed: true,
      shadow: false,
      limit: 10,
      remaining,
      resetAfterMs: 5000,
      retryAfterMs: 0,
      delayMs: undefined,
      reason: undefined,
      ...extra,
    })
    const rules = [
      part('watch', 3, { shadow: true }),
      part('open', 0, { shadow: true, unknown: true, resetAfterMs: 0 }),
      part('local', 4),
    ]
    const d: Decision = { ...part('local', 4), rules }
    const policies = rules.map((r) => ({ name: r.name, quota: 10, windowSeconds: 60 }))
    const standards: HeaderStandard[] = ['draft-10', 'legacy']
    const options = { standards, nowMs: 1000, partitionKey: new Uint8Array([0]) }
    expect(rateLimitHeaders(d, policies, options)).toEqual([
      ['ratelimit-policy', '"open";q=10;w=60;pk=:AA==:, "local";q=10;w=60;pk=:AA==:'],
      ['ratelimit', '"local";r=4;t=5;pk=:AA==:'],
      ['x-ratelimit-limit', '10'],
      ['x-ratelimit-remaining', '4'],
      ['x-ratelimit-reset', '6'],
    ])
    expect(headerRenderer(policies, standards)(d, 1000, ';pk=:AA==:')).toEqual(
      referenceHeaders(d, policies, options),
    )
  })

  it.each([
    ['after', false],
    ['before', true],
  ])(
    'when no rule knows its state, a shadow rule (%s the open one) is in no field: the unknown rules have their members and bind',
    async (_, shadowFirst) => {
      // The store is down: "open" fails open, "watch" observes (its fallback decides it locally).
      const down: Store = {
        name: 'down',
        decider: remoteDecider,
        bind: () => ({
          evaluate: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1')),
          reset: () => Promise.resolve(),
        }),
      }
      const open: Rule = {
        name: 'open',
        algorithm: fixedWindow({ limit: 100, window: '60s' }),
        onStoreError: 'open',
      }
      const watch: Rule = {
        name: 'watch',
        algorithm: fixedWindow({ limit: 10, window: '60s' }),
        mode: 'shadow',
        onStoreError: 'local',
      }
      const rules = shadowFirst ? [watch, open] : [open, watch]
      const clock = manualClock(0)
      const limiter = createLimiter({ rules, store: down, breaker: false, clock })
      const policies = limiter.rules.map(quotaPolicy)
      const d = await limiter.limit('k')
      expect(d.rules.map((r) => [r.name, r.shadow, r.unknown === true, r.remaining])).toEqual(
        shadowFirst
          ? [
              ['watch', true, false, 9],
              ['open', true, true, 0],
            ]
          : [
              ['open', true, true, 0],
              ['watch', true, false, 9],
            ],
      )
      // The decision and the single-policy fields speak for the enforced rule, not the shadow one.
      expect([d.allowed, d.limit, d.remaining]).toEqual([true, 100, 0])
      // The same policy fields as while the store is up (below): only the enforced rule's.
      const standards: HeaderStandard[] = ['draft-10', 'draft-7', 'legacy']
      expect(rateLimitHeaders(d, policies, { standards, nowMs: 0 })).toEqual([
        ['ratelimit-policy', '"open";q=100;w=60'],
        ['ratelimit', '"open";r=0;t=0'],
        ['ratelimit', 'limit=100, remaining=0, reset=0'],
        ['ratelimit-policy', '100;w=60'],
        ['x-ratelimit-limit', '100'],
        ['x-ratelimit-remaining', '0'],
        ['x-ratelimit-reset', '0'],
      ])
      expect(headerRenderer(policies, standards)(d, 0, '')).toEqual(
        referenceHeaders(d, policies, { standards, nowMs: 0 }),
      )
      const up = createLimiter({ rules: rules.map(({ onStoreError, ...r }) => r), clock })
      expect(rateLimitHeaders(await up.limit('k'), policies, { standards, nowMs: 0 })).toEqual([
        ['ratelimit-policy', '"open";q=100;w=60'],
        ['ratelimit', '"open";r=99;t=60'],
        ['ratelimit', 'limit=100, remaining=99, reset=60'],
        ['ratelimit-policy', '100;w=60'],
        ['x-ratelimit-limit', '100'],
        ['x-ratelimit-remaining', '99'],
        ['x-ratelimit-reset', '60'],
      ])
    },
  )

  it('a rule enforced for some keys (enforce < 100) is in both fields for those keys only', async () => {
    const { limiter } = setup([
      { name: 'trial', algorithm: fixedWindow({ limit: 3, window: '10s' }), enforce: 50 },
      { name: 'api', algorithm: fixedWindow({ limit: 100, window: '1m' }) },
    ])
    const policies = limiter.rules.map(quotaPolicy)
    const render = headerRenderer(policies, ['draft-10'])
    const seen = new Map<boolean, Record<string, string>>()
    for (let i = 0; i < 40 && seen.size < 2; i++) {
      const d = await limiter.limit(`key-${i}`)
      seen.set(d.rules[0]?.shadow === true, Object.fromEntries(render(d, 0, ';pk=:AA==:')))
    }
    expect(seen.get(false)).toEqual({
      'ratelimit-policy': '"trial";q=3;w=10;pk=:AA==:, "api";q=100;w=60;pk=:AA==:',
      ratelimit: '"trial";r=2;t=10;pk=:AA==:, "api";r=99;t=20;pk=:AA==:',
    })
    expect(seen.get(true)).toEqual({
      'ratelimit-policy': '"api";q=100;w=60;pk=:AA==:',
      ratelimit: '"api";r=99;t=20;pk=:AA==:',
    })
  })
})
