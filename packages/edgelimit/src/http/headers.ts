import { ConfigError } from '../errors.js'
import type { Decision, RuleDecision } from '../limiter.js'
import { bindingRule } from '../limiter.js'
import type { StoreRule } from '../stores/types.js'
import { createIssues, type Issues } from '../validate.js'

/**
 * Which rate-limit header fields to emit (see the README's HTTP section):
 * - `draft-10`: `RateLimit` and `RateLimit-Policy` as Structured-Field lists, one named member per rule;
 * - `draft-7`: `RateLimit: limit=…, remaining=…, reset=…` and `RateLimit-Policy: 100;w=60` for the rule
 *   closest to exhaustion (one policy: draft-7 §3.5 forbids two of the same quota, `10;w=1, 10;w=60`);
 * - `draft-6`: `RateLimit-Limit`, `-Remaining`, `-Reset`, `-Policy` for the rule closest to exhaustion;
 * - `legacy`: `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds).
 */
export type HeaderStandard = 'draft-10' | 'draft-7' | 'draft-6' | 'legacy'

/** Every `HeaderStandard`. */
export const STANDARDS: readonly HeaderStandard[] = ['draft-10', 'draft-7', 'draft-6', 'legacy']

/** Reports each of `standards` that is not a `HeaderStandard`, at `path`; returns the ones that are. */
export function checkStandards(issues: Issues, path: string, standards: readonly unknown[]): unknown[] {
  return standards.filter((standard) =>
    issues.expect(
      path,
      standard,
      STANDARDS.includes(standard as HeaderStandard),
      'ERR_HEADER_STANDARD',
      `one of ${STANDARDS.join(', ')}`,
    ),
  )
}

/** A rule as advertised to clients: quota `q` per window `w` seconds. */
export interface QuotaPolicy {
  readonly name: string
  readonly quota: number
  readonly windowSeconds: number
}

/**
 * The quota policy a rule advertises: its limit, and the window over which that quota applies —
 * for buckets and GCRA, the time a drained key takes to be whole again.
 */
export function quotaPolicy(rule: StoreRule): QuotaPolicy {
  const { limit, periodMs } = rule.compiled
  return { name: rule.name, quota: limit, windowSeconds: Math.max(1, ceilSeconds(periodMs)) }
}

/** An sf-string (RFC 9651 §3.3.3). Rule names are validated as printable ASCII at config time. */
export function sfString(value: string): string {
  return `"${value.replace(/[\\"]/g, '\\$&')}"`
}

/** An sf-binary (RFC 9651 §3.3.5): `:base64:`. */
export function sfBinary(bytes: Uint8Array): string {
  return `:${base64(bytes)}:`
}

/** Standard base64 (RFC 4648 §4), with padding. */
export function base64(bytes: Uint8Array): string {
  let text = ''
  for (const b of bytes) text += String.fromCharCode(b)
  return btoa(text)
}

/** Whole seconds, rounded up, never 0 for a positive wait. */
export function ceilSeconds(ms: number): number {
  return Math.ceil(ms / 1000)
}

/** Ms until a rule gives more quota: its retry time when it denies, else its reset time. */
function msUntil(rule: RuleDecision): number {
  return !rule.allowed && Number.isFinite(rule.retryAfterMs) ? rule.retryAfterMs : rule.resetAfterMs
}

/** Options of `rateLimitHeaders`. */
export interface HeaderOptions {
  /** One standard or a list, as `createRateLimit`'s `headers` takes them. @default ['draft-10'] */
  standards?: HeaderStandard | readonly HeaderStandard[]
  /** Epoch ms (an integer), for the legacy `X-RateLimit-Reset`. */
  nowMs: number
  /** A hashed partition key (never the raw key): `pk` in the draft-10 fields. */
  partitionKey?: Uint8Array
}

/**
 * The rate-limit header fields for a decision, allowed or not, plus `Retry-After` (whole seconds,
 * rounded up) when it is denied with a finite wait.
 *
 * @throws {ConfigError} for a standard it does not render (`ERR_HEADER_STANDARD`), and with
 * `legacy`, for a `nowMs` that is not an integer.
 *
 * @example
 * rateLimitHeaders(decision, limiter.rules.map(quotaPolicy), { nowMs: systemClock.now() })
 * // [['ratelimit-policy', '"burst";q=20;w=2'], ['ratelimit', '"burst";r=19;t=1']]
 */
export function rateLimitHeaders(
  decision: Decision,
  policies: readonly QuotaPolicy[],
  options: HeaderOptions,
): [string, string][] {
  const { standards = 'draft-10', nowMs, partitionKey } = options
  // Each standard once, as createRateLimit takes them.
  const list = [...new Set([standards].flat())]
  const issues = createIssues()
  checkStandards(issues, 'standards', list)
  if (list.includes('legacy')) issues.integer('nowMs', nowMs, 0, 2 ** 53 - 1)
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  const pk = partitionKey ? `;pk=${sfBinary(partitionKey)}` : ''
  return headerRenderer(policies, list)(decision, nowMs, pk)
}

/** Renders one decision's header fields: `pk` is the rendered parameter (`;pk=:…:`) or `''`. */
export type HeaderRenderer = (decision: Decision, nowMs: number, pk: string) => [string, string][]

/**
 * `rateLimitHeaders` for one list of policies, with everything that does not change per request
 * (each rule's policy and member name) rendered once. Same fields, byte for byte.
 *
 * @example
 * const render = headerRenderer(limiter.rules.map(quotaPolicy), ['draft-10'])
 * render(decision, 0, '') // [['ratelimit-policy', '"api";q=100;w=60'], ['ratelimit', '"api";r=99;t=60']]
 */
export function headerRenderer(
  policies: readonly QuotaPolicy[],
  standards: readonly HeaderStandard[] = ['draft-10'],
): HeaderRenderer {
  const names = policies.map((p) => p.name)
  // `"name";r=` and `"name";q=…;w=…` per rule.
  const members = policies.map((p) => `${sfString(p.name)};r=`)
  const quotas = policies.map((p) => `${sfString(p.name)};q=${p.quota};w=${p.windowSeconds}`)
  // draft-7 and draft-6: the binding rule's policy only.
  const singles = policies.map((p) => `${p.quota};w=${p.windowSeconds}`)

  // A rule that only observes this request (shadow, or outside its `enforce` share) is left out of
  // both fields, as the other standards leave it out when they pick the binding rule: it never
  // blocks, and a client pacing itself by it would skew what it observes. A rule whose state is not
  // known here (`unknown`: not asked, or failing open; `shadow` too in a decision of several rules)
  // keeps its policy, so that the field stays the same over a client's answers (§3), and loses its
  // member while another rule is known (when none is, the unknown ones have theirs, as the gateway
  // shows them). Unless every rule only observes, when all are shown, as the decision's own fields
  // show them.
  function draft10(out: [string, string][], decision: Decision, pk: string): void {
    const rules = decision.rules
    // One rule is shown whatever its mode: no search on the common path.
    const known = rules.length > 1 && rules.some((r) => !r.shadow)
    const enforced = known || (rules.length > 1 && rules.some((r) => r.unknown))
    let policy = ''
    let current = ''
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i] as RuleDecision
      const hide = r.shadow && enforced
      if (hide && !r.unknown) continue
      policy += `${policy && ', '}${quotas[i]}${pk}`
      if (hide && known) continue
      const member = r.name === names[i] ? (members[i] as string) : `${sfString(r.name)};r=`
      current += `${current && ', '}${member}${r.remaining};t=${ceilSeconds(msUntil(r))}${pk}`
    }
    out.push(['ratelimit-policy', policy], ['ratelimit', current])
  }

  return (decision, nowMs, pk) => {
    const out: [string, string][] = []
    for (const standard of standards) {
      if (standard === 'draft-10') {
        draft10(out, decision, pk)
        continue
      }
      // The other standards show one rule, the binding one: draft-10 alone (the default) needs no search.
      const bind = bindingRule(decision.rules, decision.allowed)
      const top = decision.rules[bind] as RuleDecision
      if (standard === 'draft-7')
        out.push(
          ['ratelimit', `limit=${top.limit}, remaining=${top.remaining}, reset=${ceilSeconds(msUntil(top))}`],
          ['ratelimit-policy', singles[bind] as string],
        )
      else {
        const legacy = standard === 'legacy'
        const prefix = legacy ? 'x-ratelimit-' : 'ratelimit-'
        out.push(
          [`${prefix}limit`, `${top.limit}`],
          [`${prefix}remaining`, `${top.remaining}`],
          // Seconds to wait; legacy: the epoch second, the absolute time rounded up once.
          [`${prefix}reset`, `${ceilSeconds((legacy ? nowMs : 0) + msUntil(top))}`],
        )
        if (!legacy) out.push(['ratelimit-policy', singles[bind] as string])
      }
    }
    if (!decision.allowed && Number.isFinite(decision.retryAfterMs)) {
      out.push(['retry-after', `${Math.max(1, ceilSeconds(decision.retryAfterMs))}`])
    }
    return out
  }
}
