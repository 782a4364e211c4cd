import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { Decision } from '../limiter.js'
import { problemFor, problemJson } from './problem.js'

/** Any UTF-16 unit (lone surrogates, controls, quotes, backslashes included) or a pair. */
const text = fc.string({
  unit: fc.oneof(
    fc.constantFrom('"', '\\', '\0', '\n', '\x1f', '\x7f', '\u2028', '\ud800', '\udfff', '😀', 'é', '/'),
    fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  ),
})
const wait = fc.oneof(fc.constant(Number.POSITIVE_INFINITY), fc.integer({ min: 0, max: 10 ** 12 }))

/** Denied decisions of 1–4 rules: allowed or not, in shadow or not, finite waits or not, store down or not. */
const decisions = fc
  .record({
    retryAfterMs: wait,
    reason: fc.constantFrom('limit-exceeded', 'cost-exceeds-limit', 'store-unavailable'),
    rules: fc.array(
      fc.record({ name: text, allowed: fc.boolean(), shadow: fc.boolean(), retryAfterMs: wait }),
      { minLength: 1, maxLength: 4 },
    ),
  })
  .map((d) => ({ ...d, allowed: false }) as unknown as Decision)

describe('problemJson', () => {
  it('writes what JSON.stringify writes for every problem problemFor makes', () => {
    fc.assert(
      fc.property(decisions, text, (decision, instance) => {
        const problem = problemFor(decision, instance)
        expect(problemJson(problem)).toBe(JSON.stringify(problem))
      }),
      { numRuns: 20_000 },
    )
  })

  it('keeps each denial its own retryAfter and instance', () => {
    const denial = (retryAfterMs: number) =>
      ({
        allowed: false,
        retryAfterMs,
        reason: 'limit-exceeded',
        rules: [{ name: 'api', allowed: false, shadow: false, retryAfterMs }],
      }) as unknown as Decision
    const first = JSON.parse(problemJson(problemFor(denial(2_500), '/a')))
    const second = JSON.parse(problemJson(problemFor(denial(61_000), '/b"\\')))
    expect([first.retryAfter, first.instance, first.detail]).toEqual([
      3,
      '/a',
      'Rate limit exceeded (api); retry in 3 s.',
    ])
    expect([second.retryAfter, second.instance, second.detail]).toEqual([
      61,
      '/b"\\',
      'Rate limit exceeded (api); retry in 61 s.',
    ])
  })
})
