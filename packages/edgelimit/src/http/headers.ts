import type { Policy } from '../core/types.js'
import type { Decision, RuleDecision } from '../limiter.js'
import { bindingRule } from '../limiter.js'
import type { StoreRule } from '../stores/types.js'

/**
 * Which rate-limit header fields to emit (REFERENCE §4):
 * - `draft-10`: `RateLimit` and `RateLimit-Policy` as Structured-Field lists, one named member per rule;
 * - `draft-7`: `RateLimit: limit=…, remaining=…, reset=…` and `RateLimit-Policy: 100;w=60, …`;
 * - `draft-6`: `RateLimit-Limit`, `-Remaining`, `-Reset`, `-Policy` for the rule closest to exhaustion;
 * - `legacy`: `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds).
 */
export type HeaderStandard = 'draft-10' | 'draft-7' | 'draft-6' | 'legacy'

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
  const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000))
  const p: Policy = rule.policy
  switch (p.algorithm) {
    case 'fixed-window':
    case 'sliding-window':
    case 'sliding-log':
      return { name: rule.name, quota: p.limit, windowSeconds: seconds(p.windowMs) }
    case 'token-bucket':
      return {
        name: rule.name,
        quota: p.capacity,
        windowSeconds: seconds((p.capacity * p.refillIntervalMs) / p.refillRate),
      }
    case 'leaky-bucket': {
      const quota = p.mode === 'shape' ? p.capacity + 1 : p.capacity
      return { name: rule.name, quota, windowSeconds: seconds((quota * p.leakIntervalMs) / p.leakRate) }
    }
    case 'gcra':
      return { name: rule.name, quota: p.burst, windowSeconds: seconds((p.burst * p.periodMs) / p.limit) }
  }
}

/** An sf-string (RFC 9651 §3.3.3). Rule names are validated as printable ASCII at config time. */
export function sfString(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/** An sf-binary (RFC 9651 §3.3.5): `:base64:`. */
export function sfBinary(bytes: Uint8Array): string {
  let text = ''
  for (const b of bytes) text += String.fromCharCode(b)
  return `:${btoa(text)}:`
}

/** Whole seconds, rounded up, never 0 for a positive wait. */
export function ceilSeconds(ms: number): number {
  return Math.ceil(ms / 1000)
}

/** Seconds until a rule gives more quota: its retry time when it denies, else its reset time. */
function secondsUntil(rule: RuleDecision): number {
  const ms = !rule.allowed && Number.isFinite(rule.retryAfterMs) ? rule.retryAfterMs : rule.resetAfterMs
  return ceilSeconds(ms)
}

/** Options of `rateLimitHeaders`. */
export interface HeaderOptions {
  /** @default ['draft-10'] */
  standards?: readonly HeaderStandard[]
  /** Epoch ms, for the legacy `X-RateLimit-Reset`. */
  nowMs: number
  /** A hashed partition key (never the raw key): `pk` in the draft-10 fields. */
  partitionKey?: Uint8Array
}

/**
 * The rate-limit header fields for a decision, allowed or not, plus `Retry-After` (whole seconds,
 * rounded up) when it is denied with a finite wait.
 *
 * @example
 * rateLimitHeaders(decision, limiter.rules.map(quotaPolicy), { nowMs: systemClock.now() })
 * // [['RateLimit-Policy', '"burst";q=20;w=2'], ['RateLimit', '"burst";r=19;t=1']]
 */
export function rateLimitHeaders(
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
        out.push([
          'RateLimit-Policy',
          policies.map((p) => `${sfString(p.name)};q=${p.quota};w=${p.windowSeconds}${pk}`).join(', '),
        ])
        out.push([
          'RateLimit',
          decision.rules
            .map((r) => `${sfString(r.name)};r=${r.remaining};t=${secondsUntil(r)}${pk}`)
            .join(', '),
        ])
        break
      }
      case 'draft-7':
        out.push(['RateLimit', `limit=${top.limit}, remaining=${top.remaining}, reset=${secondsUntil(top)}`])
        out.push(['RateLimit-Policy', policies.map((p) => `${p.quota};w=${p.windowSeconds}`).join(', ')])
        break
      case 'draft-6':
        out.push(['RateLimit-Limit', String(top.limit)])
        out.push(['RateLimit-Remaining', String(top.remaining)])
        out.push(['RateLimit-Reset', String(secondsUntil(top))])
        out.push(['RateLimit-Policy', `${topPolicy.quota};w=${topPolicy.windowSeconds}`])
        break
      case 'legacy':
        out.push(['X-RateLimit-Limit', String(top.limit)])
        out.push(['X-RateLimit-Remaining', String(top.remaining)])
        out.push(['X-RateLimit-Reset', String(Math.ceil((options.nowMs + secondsUntil(top) * 1000) / 1000))])
        break
    }
  }
  if (!decision.allowed && Number.isFinite(decision.retryAfterMs)) {
    out.push(['Retry-After', String(Math.max(1, ceilSeconds(decision.retryAfterMs)))])
  }
  return out
}
