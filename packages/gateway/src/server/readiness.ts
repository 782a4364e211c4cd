import type { RuleConfig } from '../config/types.js'
import type { CompiledPolicy } from '../policy/compile.js'

/** What `GET /readyz` answers: 200 when `ready`, else 503. */
export interface Readiness {
  readonly ready: boolean
  /**
   * `ready`; `draining` (shutting down); `store-unreachable` (a fail-closed rule refuses every
   * request until the store is back); `degraded` (the store is unreachable, but requests are still
   * served: by the rules' fallbacks, or outside the fail-closed rules).
   */
  readonly status: 'ready' | 'draining' | 'store-unreachable' | 'degraded'
  readonly draining: boolean
  readonly store: { readonly type: string; readonly status: string; readonly reachable: boolean }
  /** While the store is unreachable: the enforced rules that answer 503 to (some of) their requests. */
  readonly failClosed?: readonly string[]
  /** While the store is unreachable: those of `failClosed` that every request goes through. */
  readonly refusesEvery?: readonly string[]
}

/**
 * Whether a rule answers 503 for some of its requests while the store is unreachable: enforced
 * (shadow never refuses), failing closed, and using the store (a `local` rule never does; an
 * `approximate` one goes on from its local counts for the keys it knows, and refuses the others).
 */
function failsClosed(rule: RuleConfig): boolean {
  return (
    rule.onStoreError === 'closed' &&
    rule.consistency !== 'local' &&
    rule.mode === 'enforce' &&
    rule.enforce > 0
  )
}

/** Whether a fail-closed rule refuses every request: it matches all of them, for every key. */
function refusesEvery(rule: RuleConfig): boolean {
  const { hosts, paths, methods, headers } = rule.match
  return (
    rule.consistency === 'strict' &&
    rule.enforce === 100 &&
    hosts.length === 0 &&
    methods.length === 0 &&
    headers.length === 0 &&
    (paths.length === 0 || paths.includes('/**'))
  )
}

/**
 * The gateway's readiness (docs/decisions/0016-readiness-follows-what-the-proxy-would-answer.md):
 * not ready while draining, or while the store is unreachable and a fail-closed rule would refuse
 * every request anyway; otherwise ready, `degraded` while the store is unreachable. Unreachable: a
 * Redis client not connected (it reconnects by itself, so this is known without traffic). An
 * Upstash store has no connection: it reads as reachable.
 *
 * @example const { ready } = readiness(policy, false) // false while Redis is down under a catch-all fail-closed rule
 */
export function readiness(policy: CompiledPolicy, draining: boolean): Readiness {
  const status = policy.store.status()
  const store = { type: policy.store.type, status, reachable: status === 'ready' }
  if (draining) return { ready: false, status: 'draining', draining, store }
  if (store.reachable) return { ready: true, status: 'ready', draining, store }
  const failClosed = policy.rules.filter((r) => failsClosed(r.config))
  const refusing = failClosed.filter((r) => refusesEvery(r.config)).map((r) => r.name)
  return {
    ready: refusing.length === 0,
    status: refusing.length === 0 ? 'degraded' : 'store-unreachable',
    draining,
    store,
    failClosed: failClosed.map((r) => r.name),
    refusesEvery: refusing,
  }
}
