import type { Decision } from '../limiter.js'
import { ceilSeconds } from './headers.js'

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity'

/** RFC 9457 problem types registered for rate limiting. */
export const PROBLEM_TYPES = {
  quotaExceeded: QUOTA_EXCEEDED,
  reducedCapacity: REDUCED_CAPACITY,
} as const

/** An RFC 9457 problem details object. */
export interface ProblemDetails {
  readonly type: string
  readonly title: string
  readonly status: number
  readonly detail: string
  readonly instance: string
  readonly 'violated-policies'?: readonly string[]
  readonly retryAfter?: number
}

/**
 * The problem body for a denial: 429 quota-exceeded, naming the rules that denied; or 503
 * temporary-reduced-capacity when the store is unavailable under fail-closed.
 *
 * @example
 * problemFor(decision, '/api/orders') // { type: '…#quota-exceeded', status: 429, retryAfter: 3, … }
 */
export function problemFor(decision: Decision, instance: string): ProblemDetails {
  const retryAfter = Number.isFinite(decision.retryAfterMs)
    ? Math.max(1, ceilSeconds(decision.retryAfterMs))
    : undefined
  // A rule in shadow denies without blocking: it is not why this request was refused.
  const denying = decision.rules.filter((r) => !r.allowed && !r.shadow)
  const violated = denying.map((r) => r.name)
  const problem: { -readonly [K in keyof ProblemDetails]: ProblemDetails[K] } =
    (decision.reason as string | undefined) === 'store-unavailable'
      ? {
          type: REDUCED_CAPACITY,
          title: 'Service Unavailable',
          status: 503,
          detail: 'The rate-limit store is unavailable; try again shortly.',
          instance,
        }
      : {
          type: QUOTA_EXCEEDED,
          title: 'Too Many Requests',
          status: 429,
          detail:
            retryAfter === undefined
              ? // Only the rules that never admit this cost: another that denies admits it later.
                `This request costs more than ${denying
                  .filter((r) => !Number.isFinite(r.retryAfterMs))
                  .map((r) => r.name)
                  .join(', ')} can ever admit.`
              : `Rate limit exceeded (${violated.join(', ')}); retry in ${retryAfter} s.`,
          instance,
          'violated-policies': violated,
        }
  if (retryAfter !== undefined) problem.retryAfter = retryAfter
  return problem
}

/** A JSON string as `JSON.stringify` writes it: as it is when nothing in it needs an escape. */
function jsonString(text: string): string {
  return /["\\\0-\x1f\ud800-\udfff]/.test(text) ? JSON.stringify(text) : `"${text}"`
}

/**
 * `JSON.stringify(problem)` for a problem from `problemFor`, byte for byte, written out from its
 * fields (its type and title are constants that need no escape): `JSON.stringify`'s walk of the
 * object and its escaping of every character was the largest part of a denial (about 11,600
 * instructions of a Node http adapter's 98,000 per 429, under callgrind). Not in the edge bundle
 * (`createRateLimitCore`'s `json`): the fetch wrapper keeps `JSON.stringify`.
 */
export function problemJson(problem: ProblemDetails): string {
  const violated = problem['violated-policies']
  return `{"type":"${problem.type}","title":"${problem.title}","status":${problem.status},"detail":${jsonString(problem.detail)},"instance":${jsonString(problem.instance)}${violated ? `,"violated-policies":[${violated.map(jsonString)}]` : ''}${problem.retryAfter === undefined ? '' : `,"retryAfter":${problem.retryAfter}`}}`
}
