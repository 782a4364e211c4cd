import { ConfigError, createLimiter, type Limiter, memoryStore, type Policy } from 'edgelimit'
import type { Checker } from './checker.js'
import { type Path, parsePath } from './issues.js'
import type { PlanConfig } from './types.js'

/**
 * The library validates the algorithm's parameters: one source of truth for their bounds. Returns
 * the plan's limiter (memory store, a clock fixed at 0) when they are valid.
 */
export function checkPlan(
  c: Checker,
  path: Path,
  name: string,
  plan: PlanConfig,
  own: Record<string, unknown>,
): Limiter | undefined {
  try {
    return createLimiter({
      rules: [{ name: plan.tier === '' ? name : `${name}.${plan.tier}`, algorithm: plan.algorithm }],
      clock: { now: () => 0 },
      // One key (checkCost's): the default table of 1,024 keys per plan weighed 40 KB per rule.
      store: memoryStore({ maxKeys: 1 }),
    })
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    const written = plan.algorithm.options
    const paramOf = (p: string) => parsePath(p)[3]
    const onWritten = error.issues.some((i) => String(paramOf(i.path)) in written)
    for (const issue of error.issues) {
      const segments = parsePath(issue.path)
      // rules[0].algorithm.<param>: the param where it was written (the plan overrides the rule).
      const param = segments[3] === undefined ? undefined : String(segments[3])
      const shown = param === 'mode' ? 'shape' : param
      let at: Path = path
      let { code, message } = issue
      if (shown !== undefined) {
        at =
          plan.tier !== '' && !(shown in own)
            ? [...path, 'tiers', 'plans', plan.tier, shown]
            : [...path, shown]
        if (param !== undefined && !(param in written)) {
          // A parameter not written: required, or a default derived from an invalid one (gcra burst).
          if (onWritten) continue
          code = 'ERR_REQUIRED'
          message = `the parameter "${shown}" is required by ${plan.algorithm.algorithm}`
          at = plan.tier === '' ? [...path, shown] : [...path, 'tiers', 'plans', plan.tier, shown]
        }
      }
      if (!c.has(at, { is: code })) c.add(at, code, message)
    }
    return undefined
  }
}

const NEVER = 'ERR_COST_NEVER_ADMITTED'

/**
 * Refuses a cost the plan can never admit: every request the rule matches would be denied for ever
 * (and, behind another rule, told to retry after that rule's wait). The library's own answer
 * decides it: a fresh key asked for the cost once denies with `cost-exceeds-limit`.
 */
export function checkCost(
  c: Checker,
  at: Path,
  name: string,
  plan: PlanConfig,
  limiter: Limiter,
  cost: number,
): void {
  // An invalid cost was reported where it was written (and replaced by the default).
  if (cost === 0 || c.has(at, { except: NEVER })) return
  const decision = limiter.limitSync('cost-check', { cost })
  if (decision.reason !== 'cost-exceeds-limit') return
  const policy = limiter.rules[0]?.policy as Policy
  const { bound, raise } = boundOf(policy)
  const rule = plan.tier === '' ? `"${name}"` : `"${name}" tier "${plan.tier}"`
  c.add(
    at,
    NEVER,
    `${cost} can never pass rule ${rule} (${bound} admits at most ${decision.limit} per request); lower the cost or raise the ${raise}`,
  )
}

/** The parameter that bounds what one request of a policy may cost, as the policy file names it. */
function boundOf(policy: Policy): { bound: string; raise: string } {
  switch (policy.algorithm) {
    case 'fixed-window':
    case 'sliding-log':
    case 'sliding-window':
      return { bound: `${policy.algorithm} limit ${policy.limit}`, raise: 'limit' }
    case 'token-bucket':
      return { bound: `token-bucket capacity ${policy.capacity}`, raise: 'capacity' }
    case 'leaky-bucket':
      return {
        bound: `${policy.mode === 'shape' ? 'shaping ' : ''}leaky-bucket capacity ${policy.capacity}`,
        raise: 'capacity',
      }
    case 'gcra':
      return { bound: `gcra burst ${policy.burst}`, raise: 'burst' }
  }
}
