import type { Decision, RuleDecision } from 'edgelimit'
import { bindingRule, type HeaderStandard, problemFor, problemJson, rateLimitHeaders } from '../library.js'
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
 * denial stops the walk (later rules are not charged, only listed in `RateLimit-Policy`); rules
 * before it have already counted the request — a conservative over-count, as in the library's
 * mixed-consistency rules.
 *
 * @example const verdict = await decide(policy, fromIncoming(req), Date.now())
 */
export async function decide(policy: CompiledPolicy, request: RequestInfo, nowMs: number): Promise<Verdict> {
  let parts: Part[] | undefined
  const context: KeyContext = {}
  const rules = policy.rules
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i] as CompiledRule
    const route = rule.match(request)
    if (route === undefined) continue
    const { key, raw } = rule.key(request, route, context)
    const plan = rule.planFor(request, raw)
    const decision = plan.observe(key, await plan.limiter.limit(key, { cost: rule.config.cost }))
    parts ??= []
    parts.push({ rule, plan, key, decision })
    if (!decision.allowed) return denied(policy, parts, i + 1, request, context, nowMs)
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
  const rules = policy.rules
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i] as CompiledRule
    const route = rule.match(request)
    if (route === undefined) continue
    const { key, raw } = rule.key(request, route, context)
    const plan = rule.planFor(request, raw)
    const decision = plan.observe(key, plan.limiter.limitSync(key, { cost: rule.config.cost }))
    parts ??= []
    parts.push({ rule, plan, key, decision })
    if (!decision.allowed) return denied(policy, parts, i + 1, request, context, nowMs)
  }
  return parts === undefined ? NO_RULES : answer(parts, policy.config.headers, request.path, nowMs)
}

/**
 * The verdict of a walk stopped by a denial: `RateLimit-Policy` also lists the policies of the
 * later rules that match (draft-10 §3: the field stays consistent over a client's answers, and
 * the admitted ones list them). Those rules are not asked — matching and keying charge nothing —
 * so they have no `RateLimit` member.
 */
function denied(
  policy: CompiledPolicy,
  parts: Part[],
  from: number,
  request: RequestInfo,
  context: KeyContext,
  nowMs: number,
): Verdict {
  let later = ''
  const rules = policy.rules
  // Only draft-10 lists every rule's policy (draft-7 and draft-6 name the binding rule's alone).
  for (let i = policy.config.headers.includes('draft-10') ? from : rules.length; i < rules.length; i++) {
    const rule = rules[i] as CompiledRule
    const route = rule.match(request)
    if (route === undefined) continue
    // Only `tiers.keys` and an `enforce` share read the key: no hashing for the rest.
    const seen = rule.config.tiers === undefined ? undefined : rule.key(request, route, context)
    const plan = rule.planFor(request, seen?.raw ?? '')
    // A rule that only observes this key is not listed, as the library leaves it out (its members
    // are shown only when every rule observes, and the denying rule does not).
    if (plan.observes?.((seen ?? rule.key(request, route, context)).key)) continue
    later += `, ${plan.policyMembers}`
  }
  return answer(parts, policy.config.headers, request.path, nowMs, later)
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

/**
 * `later`: draft-10 `RateLimit-Policy` members listed after those of the parts (`, "name";q=…`:
 * the rules after a denial, see `denied`).
 */
function answer(
  parts: Part[],
  standards: readonly HeaderStandard[],
  path: string,
  nowMs: number,
  later = '',
): Verdict {
  const only = parts.length === 1 ? (parts[0] as Part) : undefined
  if (only?.decision.allowed) {
    const headers = standards.length === 0 ? [] : admittedHeaders(only, standards, nowMs)
    return { allowed: true, headers, delayMs: only.decision.delayMs ?? 0, parts }
  }
  const decision = only?.decision ?? combine(parts)
  const policies = only?.plan.policies ?? parts.flatMap((p) => p.plan.policies)
  // With no standards (`headers: false`) a denial still gets its Retry-After (RFC 6585, REFERENCE §4).
  const headers =
    standards.length === 0 && decision.allowed
      ? []
      : rateLimitHeaders(decision, policies, { standards, nowMs })
  if (later !== '') {
    // After the decided rules' members; draft-10's field is the first `ratelimit-policy`.
    const at = headers.findIndex(([name]) => name === 'ratelimit-policy')
    const field = headers[at] as [string, string]
    headers[at] = [field[0], field[1] + later]
  }
  if (decision.allowed) return { allowed: true, headers, delayMs: decision.delayMs ?? 0, parts }
  const problem = problemFor(decision, path)
  return {
    allowed: false,
    headers,
    delayMs: 0,
    denial: { status: problem.status, body: problemJson(problem) },
    parts,
  }
}

/**
 * The decisions of several limiters as one: allowed when every enforced rule admits. A rule whose
 * state is not known (failing open: the one rule of its limiter, so not `shadow`) is made one
 * that observes while another rule knows its state, as the library does for a limiter's rules:
 * it does not bind, and keeps its policy without a `RateLimit` member.
 */
function combine(parts: readonly Part[]): Decision {
  let rules: RuleDecision[] = parts.flatMap((p) => p.decision.rules)
  if (rules.some((r) => r.unknown) && rules.some((r) => !r.shadow && !r.unknown)) {
    rules = rules.map((r) => (r.unknown ? { ...r, shadow: true } : r))
  }
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
