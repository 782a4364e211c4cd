import type { Logger } from 'pino'
import type { Verdict } from '../policy/decide.js'
import type { RequestInfo } from '../policy/request.js'
import type { Metrics } from './metrics.js'

/**
 * Counts a verdict's decisions, rule by rule, and logs each denial a shadow rule would have made.
 *
 * @example if (verdict.parts.length > 0) observe(metrics, log, verdict, request)
 */
export function observe(metrics: Metrics, log: Logger, verdict: Verdict, request: RequestInfo): void {
  for (const part of verdict.parts) {
    for (const r of part.decision.rules) {
      // A rule whose state is not known (failing open, or not asked) did not admit the request.
      const outcome = r.unknown ? 'unknown' : r.allowed ? 'allowed' : r.shadow ? 'shadow_denied' : 'denied'
      metrics.decision(part.rule.name, part.plan.tier, outcome, part.key)
      if (outcome === 'shadow_denied') {
        log.warn(
          {
            rule: part.rule.name,
            tier: part.plan.tier || undefined,
            key: part.key,
            method: request.method,
            path: request.path,
            limit: r.limit,
            retryAfterMs: Number.isFinite(r.retryAfterMs) ? r.retryAfterMs : null,
            mode: part.rule.config.mode === 'shadow' ? 'shadow' : `enforce ${part.rule.config.enforce}%`,
          },
          'shadow: would block',
        )
      }
    }
  }
}
