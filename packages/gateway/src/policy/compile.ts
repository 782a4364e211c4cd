import {
  approximate,
  type Clock,
  createLimiter,
  type Decision,
  type Limiter,
  type LimiterEvent,
  type LimiterOptions,
  type RuleDecision,
} from 'edgelimit'
import type { GatewayConfig, PlanConfig, RuleConfig } from '../config/types.js'
import {
  type ClientKeyOptions,
  enforcedFor,
  isTrustedPeer,
  type QuotaPolicy,
  quotaPolicy,
  rateLimitHeaders,
} from '../library.js'
import {
  compileKey,
  createClientResolver,
  createHasher,
  type KeyContext,
  type RuleKey,
  trustsSomePeer,
} from './key.js'
import { compileMatch, type Matcher } from './match.js'
import type { RequestInfo } from './request.js'
import type { StoreHandle } from './store.js'

/** One set of parameters of a rule, with its limiter. */
export interface Plan {
  /** `''` for a rule without tiers. */
  readonly tier: string
  /** The library rule's name: `<rule>` or `<rule>.<tier>` (in headers and store keys). */
  readonly name: string
  /** Enforced for every key: `mode` and `enforce` are applied to its decisions by `observe`. */
  readonly limiter: Limiter
  /**
   * The limiter's decision for `key` as the rule gives it: as a rule that only observes when in
   * shadow or outside its `enforce` share. Applied here, not by the limiter, so that a reload
   * changing `mode` or `enforce` keeps the limiter and its counters (a one-rule limiter counts
   * the same either way: only when it admits).
   */
  observe(key: string, decision: Decision): Decision
  /** Whether the rule only observes `key` (shadow, or outside its `enforce` share); `undefined`: never. */
  readonly observes: ((key: string) => boolean) | undefined
  /**
   * A peek for the admin API, on a limiter of its own: it counts in no request metric, and says
   * whether the answer came from the rule's `onStoreError` fallback instead of the store. An
   * approximate rule's is then read from its own limiter, whose counts the store lacks until
   * they are synced.
   */
  inspect(key: string): Promise<{ decision: Decision; fallback: boolean }>
  readonly policies: readonly QuotaPolicy[]
  /**
   * The draft-10 `RateLimit-Policy` members of `policies` (`"name";q=…;w=…`), rendered once: a 429
   * lists them for the matching rules after the denying one, which were not asked.
   */
  readonly policyMembers: string
  /** Header fields of admitted one-rule decisions, by remaining, then seconds (absent with `legacy`). */
  readonly headerMemo: Map<number, Map<number, readonly (readonly [string, string])[]>> | undefined
}

/** A rule ready to run: how it matches, keys and picks its plan. */
export interface CompiledRule {
  readonly config: RuleConfig
  readonly name: string
  readonly match: Matcher
  readonly key: (request: RequestInfo, route: string, context: KeyContext) => RuleKey
  readonly plans: ReadonlyMap<string, Plan>
  /** The tier for a request: `tiers.keys` by key value, then `tiers.header`, then `tiers.default`. */
  planFor(request: RequestInfo, raw: string): Plan
}

/** A policy ready to run. */
export interface CompiledPolicy {
  readonly config: GatewayConfig
  readonly rules: readonly CompiledRule[]
  readonly store: StoreHandle
  readonly identity: ClientKeyOptions
  /** Limiters by signature, so that a reload keeps the ones whose rule did not change. */
  readonly limiters: ReadonlyMap<string, Limiter>
  /**
   * Whether a direct peer is one of our own proxies (`identity.trustedProxies`, a hop count, or
   * `trustPlatform`): only then are the forwarding headers it sends passed on.
   */
  trustsPeer(peer: string | undefined): boolean
}

/**
 * Where limiter events go (metrics); called once per limiter created, with how long its breaker
 * stays open before the next call probes.
 */
export type EventSink = (
  rule: string,
  tier: string,
  openMs: number,
) => ((event: LimiterEvent) => void) | undefined

/**
 * How long every limiter's breaker stays open before it lets a probe through: the library's
 * default (`breaker.openMs`), passed explicitly so that the metrics know it.
 */
const BREAKER_OPEN_MS = 1000

/**
 * Builds limiters for every rule (one per tier), reusing those of `previous` whose rule,
 * parameters and store are unchanged: their counters carry over a reload. Every limiter reads the
 * time from `clock` (the system clock by default; a manual clock in tests and replays).
 *
 * @example const policy = compilePolicy(config, await openStore(config.store))
 */
export function compilePolicy(
  config: GatewayConfig,
  store: StoreHandle,
  previous?: CompiledPolicy,
  events?: EventSink,
  clock?: Clock,
): CompiledPolicy {
  let reuse = previous?.store === store ? previous.limiters : undefined
  const limiters = new Map<string, Limiter>()
  // The identity object is compiled once by the library (cached by object identity).
  const identity: ClientKeyOptions = { ...config.identity }
  const hasher = createHasher(identity.secret)
  const clientOf = createClientResolver(identity)
  const rules = config.rules.map((rule): CompiledRule => {
    const plans = new Map<string, Plan>()
    for (const plan of rule.plans) {
      const name = plan.tier === '' ? rule.name : `${rule.name}.${plan.tier}`
      const signature = signatureOf(store, name, rule, plan)
      const options: LimiterOptions = {
        rules: [
          {
            name,
            algorithm: plan.algorithm,
            onStoreError: rule.onStoreError,
            // Only an approximate rule syncs: the library refuses an interval on any other.
            ...(rule.consistency === 'approximate'
              ? { consistency: approximate, syncInterval: rule.syncIntervalMs }
              : { consistency: rule.consistency }),
          },
        ],
        store: store.store,
        timeout: rule.timeout,
        breaker: { openMs: BREAKER_OPEN_MS },
        ...(clock === undefined ? {} : { clock }),
      }
      let limiter = reuse?.get(signature) ?? limiters.get(signature)
      if (limiter === undefined) {
        const onEvent = store.inProcess ? undefined : events?.(rule.name, plan.tier, BREAKER_OPEN_MS)
        limiter = createLimiter(onEvent === undefined ? options : { ...options, onEvent })
      }
      limiters.set(signature, limiter)
      const shared = limiter
      const observes = observerOf(name, rule)
      const observe = observer(observes, limiter)
      const policies = limiter.rules.map(quotaPolicy)
      plans.set(plan.tier, {
        tier: plan.tier,
        name,
        limiter,
        observe,
        observes,
        inspect: async (key) => {
          let seen = store.inProcess
            ? { decision: await shared.peek(key), fallback: false }
            : await inspectApart(options, key)
          // An approximate rule decides from this gateway's own counter: the store lacks what it
          // admitted and has not synced yet. Asked once the store has answered (a fallback is told
          // apart there), the counter gives what this gateway will actually allow.
          if (!seen.fallback && !store.inProcess && rule.consistency === 'approximate') {
            const decision = await shared.peek(key)
            seen = { decision, fallback: fellBack(decision) }
          }
          return { ...seen, decision: observe(key, seen.decision) }
        },
        policies,
        policyMembers: policyMembers(policies),
        headerMemo: config.headers.includes('legacy') ? undefined : new Map(),
      })
    }
    const tiers = rule.tiers
    const only = plans.get('') as Plan
    const planFor =
      tiers === undefined
        ? () => only
        : (request: RequestInfo, raw: string): Plan => {
            const byKey = raw === '' ? undefined : tiers.keys.get(raw)
            const named =
              byKey ?? (tiers.header === undefined ? undefined : request.header(tiers.header)?.trim())
            return plans.get(named ?? tiers.default) ?? (plans.get(tiers.default) as Plan)
          }
    return {
      config: rule,
      name: rule.name,
      match: compileMatch(rule.match),
      key: compileKey(rule.key, clientOf, hasher),
      plans,
      planFor,
    }
  })
  // The closures made here (planFor, inspect, trustsPeer) share this scope: holding the previous
  // policy's limiters in it would keep those a reload retires, and their counts, alive.
  reuse = undefined
  // Trusting nobody (the default), no peer address is parsed per request.
  const trustsPeer = trustsSomePeer(identity)
    ? (peer: string | undefined) => isTrustedPeer(peer, identity)
    : () => false
  return { config, rules, store, identity, limiters, trustsPeer }
}

/**
 * The (rule, tier) pairs of `limiters` (retired ones of `policy`) that no limiter of `next`
 * reports events for — whose breaker gauges are to go: the rule or the tier is gone from `next`,
 * or `next` is on an in-process store (whose limiters report none).
 *
 * @example for (const [rule, tier] of labelsGone(old, retired, current)) metrics.forgetBreaker(rule, tier)
 */
export function labelsGone(
  policy: CompiledPolicy,
  limiters: readonly Limiter[],
  next: CompiledPolicy,
): [rule: string, tier: string][] {
  const gone: [string, string][] = []
  for (const rule of policy.rules) {
    for (const plan of rule.plans.values()) {
      if (!limiters.includes(plan.limiter)) continue
      const kept =
        !next.store.inProcess && next.rules.some((r) => r.name === rule.name && r.plans.has(plan.tier))
      if (!kept) gone.push([rule.name, plan.tier])
    }
  }
  return gone
}

/**
 * Peeks on a limiter made for this one call (the state is in the store, the limiter holds none
 * worth sharing): its events, the store's errors and fallbacks included, stay out of the metrics.
 */
async function inspectApart(options: LimiterOptions, key: string) {
  let fallback = false
  const limiter = createLimiter({
    ...options,
    onEvent: (event) => {
      if (event.type === 'fallback' || (event.type === 'decision' && event.source === 'fallback'))
        fallback = true
    },
  })
  return { decision: await limiter.peek(key), fallback }
}

/** Whether a one-rule decision came from the rule's `onStoreError` (the store failed meanwhile). */
function fellBack(decision: Decision): boolean {
  return decision.reason === 'store-unavailable' || decision.rules.some((r) => r.unknown === true)
}

/** Whether a rule only observes a key: `mode: shadow`, or outside its `enforce` share (the library's `enforcedFor`). */
function observerOf(name: string, rule: RuleConfig): Plan['observes'] {
  if (rule.mode === 'shadow') return () => true
  return rule.enforce < 100 ? (key: string) => !enforcedFor(name, key, rule.enforce) : undefined
}

/**
 * `Plan.observe` for a rule: a decision of a key the rule only observes becomes what the library
 * answers for a one-rule limiter in shadow: admitted, the rule's part marked `shadow`.
 */
function observer(observes: Plan['observes'], limiter: Limiter): Plan['observe'] {
  if (observes === undefined) return (_key, decision) => decision
  const { policy } = limiter.rules[0] as Limiter['rules'][number]
  const shaping = policy.algorithm === 'leaky-bucket' && policy.mode === 'shape'
  return (key, decision) => {
    if (!observes(key)) return decision
    const part = decision.rules[0] as RuleDecision
    return {
      allowed: true,
      limit: part.limit,
      remaining: part.allowed ? part.remaining : 0,
      resetAfterMs: part.resetAfterMs,
      retryAfterMs: 0,
      delayMs: shaping ? 0 : undefined,
      reason: undefined,
      // Observing: its `unknown` (failing open) is no concern, as for the library's shadow rules.
      rules: [{ ...part, shadow: true, unknown: undefined }],
    }
  }
}

/** A limiter is kept over a reload while this is unchanged (`mode` and `enforce` are not in it). */
function signatureOf(store: StoreHandle, name: string, rule: RuleConfig, plan: PlanConfig): string {
  return JSON.stringify([
    store.signature,
    name,
    plan.algorithm,
    rule.onStoreError,
    rule.timeout,
    rule.consistency,
    rule.syncIntervalMs,
  ])
}

/** The draft-10 `RateLimit-Policy` members of `policies`, as the library renders them. */
function policyMembers(policies: readonly QuotaPolicy[]): string {
  const rules: RuleDecision[] = policies.map((p) => ({
    name: p.name,
    allowed: true,
    shadow: false,
    limit: p.quota,
    remaining: p.quota,
    resetAfterMs: 0,
    retryAfterMs: 0,
    delayMs: undefined,
    reason: undefined,
  }))
  const decision: Decision = { ...(rules[0] as RuleDecision), rules }
  const fields = rateLimitHeaders(decision, policies, { standards: ['draft-10'], nowMs: 0 })
  return fields.find(([name]) => name === 'ratelimit-policy')?.[1] ?? ''
}
