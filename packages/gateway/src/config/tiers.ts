import { describe } from '../library.js'
import { ALL_PARAMS, type AlgorithmName, checkParams, spec } from './algorithm.js'
import { type Checker, missing } from './checker.js'
import { readHeaderName } from './header-name.js'
import type { Path } from './issues.js'
import type { PlanConfig, TiersConfig } from './types.js'

// Tier names become store keys (`<rule>.<tier>`), as rule names do: keep them plain.
const TIER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/

/** Validates a rule's `tiers`: the plans (each the rule's parameters over its own) and how a request picks one. */
export function readTiers(
  c: Checker,
  path: Path,
  value: unknown,
  algorithm: AlgorithmName,
  own: Record<string, unknown>,
): { tiers: TiersConfig | undefined; plans: PlanConfig[] } {
  if (!c.object(path, value)) return { tiers: undefined, plans: [] }
  c.fields(path, value, ['header', 'keys', 'default', 'plans'])
  const plans: PlanConfig[] = []
  if (value.plans === undefined) missing(c, path, 'plans')
  else if (c.object([...path, 'plans'], value.plans)) {
    if (Object.keys(value.plans).length === 0)
      c.add([...path, 'plans'], 'ERR_TIER', 'expected at least one plan')
    for (const [tier, params] of Object.entries(value.plans)) {
      const at = [...path, 'plans', tier]
      if (!TIER_NAME.test(tier)) {
        c.add(
          at,
          'ERR_TIER',
          `expected a tier name of letters, digits, "-" or "_", got ${describe(tier)}`,
          'key',
        )
      }
      if (!c.object(at, params)) continue
      c.fields(at, params, ALL_PARAMS)
      checkParams(c, at, params, algorithm)
      plans.push({ tier, algorithm: spec(algorithm, { ...own, ...params }) })
    }
  }
  const known = new Set(plans.map((p) => p.tier))
  const tierName = (at: Path, v: unknown): string | undefined => {
    const s = c.string(at, v)
    if (s !== undefined && !known.has(s) && plans.length > 0) {
      c.add(at, 'ERR_TIER', `"${s}" is not one of the plans (${[...known].join(', ')})`)
      return undefined
    }
    return s
  }
  const header = value.header === undefined ? undefined : readHeaderName(c, [...path, 'header'], value.header)
  const keys = new Map<string, string>()
  if (value.keys !== undefined && c.object([...path, 'keys'], value.keys)) {
    for (const [k, tier] of Object.entries(value.keys)) {
      const t = tierName([...path, 'keys', k], tier)
      if (t !== undefined) keys.set(k, t)
    }
  }
  if (value.header === undefined && value.keys === undefined) {
    c.add(
      path,
      'ERR_TIER',
      'choose the tier by `header` (a request header) or `keys` (key value → plan), or both',
    )
  }
  const fallback =
    value.default === undefined ? missing(c, path, 'default') : tierName([...path, 'default'], value.default)
  return { tiers: fallback === undefined ? undefined : { header, keys, default: fallback }, plans }
}
