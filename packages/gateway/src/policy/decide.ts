import type { Decision, RuleDecision } from 'edgelimit'
import {
  bindingRule,
  type HeaderStandard,
  problemFor,
  type QuotaPolicy,
  rateLimitHeaders,
} from '../library.js'
import type { CompiledPolicy, CompiledRule, Plan } from './compile.js'
import type { KeyContext } from './key.js'
import type { RequestInfo } from './request.js'

/** One matching rule's part of a verdict. */
export interface Part {
  readonly rule: CompiledRule
  readonly plan: Plan
  /** The (hashed) store key. */
  readonly key: string
  readonly decision: Decision
}

/** How to answer a request. */
export interface Verdict {
  readonly allowed: boolean
  /** Rate-limit header fields (and `Retry-After` on a denial), for whatever answer is sent. */
  readonly headers: readonly (readonly [string, string])[]
  /** Hold an admitted request this long first (shaping). */
  readonly delayMs: number
  /** The 429/503 answer of a denied request. */
  readonly denial?: { readonly status: number; readonly body: string }
  readonly parts: readonly Part[]
}

const NO_RULES: Verdict = { allowed: true, headers: [], delayMs: 0, parts: [] }

/**
 * Applies every rule that matches, in order: a request passes only if all of them admit it.
 * Each rule keys the request its own way, so rules are separate limiters: the first enforced
 * denial stops the walk (later rules are not charged); rules before it have already counted the
 * request — a conservative over-count, as in the library's mixed-consistency rules.
 *
 * @example const verdict = await decide(policy, fromIncoming(req), Date.now())
 */
export async function decide(policy: CompiledPolicy, request: RequestInfo, nowMs: number): Promise<Verdict> {
  let parts: Part[] | undefined
  const context: KeyContext = {}
  for (const rule of policy.rules) {
    const route = rule.match(request)
    if (route === undefined) continue
    const { key, raw } = rule.key(request, route, context)
    const plan = rule.planFor(request, raw)
    const decision = plan.observe(key, await plan.limiter.limit(key, { cost: rule.config.cost }))
    parts ??= []
    parts.push({ rule, plan, key, decision })
    if (!decision.allowed) break
  }
  return parts === undefined ? NO_RULES : answer(parts, policy.config.headers, request.path, nowMs)
}

/**
 * `decide` for a store that answers in-process (the memory store): the same walk, without a
 * promise per request.
 */
export function decideSync(policy: CompiledPolicy, request: RequestInfo, nowMs: number): Verdict {
  let parts: Part[] | undefined
  const context: KeyContext = {}
  for (const rule of policy.rules) {
    const route = rule.match(request)
    if (route === undefined) continue
    const { key, raw } = rule.key(request, route, context)
    const plan = rule.planFor(request, raw)
    const decision = plan.observe(key, plan.limiter.limitSync(key, { cost: rule.config.cost }))
    parts ??= []
    parts.push({ rule, plan, key, decision })
    if (!decision.allowed) break
  }
  return parts === undefined ? NO_RULES : answer(parts, policy.config.headers, request.path, nowMs)
}

type Headers = readonly (readonly [string, string])[]

/**
 * The header fields of one admitted rule depend only on its remaining quota and the whole
 * seconds until it is fresh (the `legacy` reset, an epoch time, excepted): formatted once per
 * such pair, per plan.
 */
function admittedHeaders(part: Part, standards: readonly HeaderStandard[], nowMs: number): Headers {
  const rule = part.decision.rules[0] as RuleDecision
  const memo = part.plan.headerMemo
  if (memo === undefined || !rule.allowed) {
    return rateLimitHeaders(part.decision, part.plan.policies, { standards, nowMs })
  }
  const seconds = Math.ceil(rule.resetAfterMs / 1000)
  let bySeconds = memo.get(rule.remaining)
  if (bySeconds === undefined) {
    if (memo.size >= 1024) memo.clear()
    bySeconds = new Map()
    memo.set(rule.remaining, bySeconds)
  }
  let headers = bySeconds.get(seconds)
  if (headers === undefined) {
    headers = rateLimitHeaders(part.decision, part.plan.policies, { standards, nowMs })
    bySeconds.set(seconds, headers)
  }
  return headers
}

function answer(parts: Part[], standards: readonly HeaderStandard[], path: string, nowMs: number): Verdict {
  const only = parts.length === 1 ? (parts[0] as Part) : undefined
  if (only?.decision.allowed) {
    const headers = standards.length === 0 ? [] : admittedHeaders(only, standards, nowMs)
    return { allowed: true, headers, delayMs: only.decision.delayMs ?? 0, parts }
  }
  const decision = only?.decision ?? combine(parts)
  const policies: readonly QuotaPolicy[] = only?.plan.policies ?? parts.flatMap((p) => p.plan.policies)
  // With no standards (`headers: false`) a denial still gets its Retry-After (RFC 6585, REFERENCE §4).
  const headers =
    standards.length === 0 && decision.allowed
      ? []
      : rateLimitHeaders(decision, policies, { standards, nowMs })
  if (decision.allowed) return { allowed: true, headers, delayMs: decision.delayMs ?? 0, parts }
  const problem = problemFor(decision, path)
  return {
    allowed: false,
    headers,
    delayMs: 0,
    denial: { status: problem.status, body: JSON.stringify(problem) },
    parts,
  }
}

/** The decisions of several limiters as one: allowed when every enforced rule admits. */
function combine(parts: readonly Part[]): Decision {
  const rules: RuleDecision[] = parts.flatMap((p) => p.decision.rules)
  const allowed = parts.every((p) => p.decision.allowed)
  const bind = rules[bindingRule(rules, allowed)] as RuleDecision
  let delay = 0
  for (const p of parts) delay = Math.max(delay, p.decision.delayMs ?? 0)
  return {
    allowed,
    limit: bind.limit,
    remaining: allowed && !bind.allowed ? 0 : bind.remaining,
    resetAfterMs: bind.resetAfterMs,
    retryAfterMs: allowed ? 0 : bind.retryAfterMs,
    delayMs: allowed ? delay : undefined,
    reason: allowed ? undefined : bind.reason,
    rules,
  }
}
