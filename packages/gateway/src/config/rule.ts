import { describe } from '../library.js'
import { ALL_PARAMS, checkParams, readAlgorithm, spec } from './algorithm.js'
import { type Checker, missing } from './checker.js'
import { DEFAULT_FIELDS, type Defaults, readDefaults } from './defaults.js'
import type { Path } from './issues.js'
import { NO_MATCH, readMatch } from './match.js'
import { checkCost, checkPlan } from './plan-check.js'
import { readTiers } from './tiers.js'
import type { PlanConfig, RuleConfig, TiersConfig } from './types.js'

const RULE_FIELDS = ['name', 'match', 'algorithm', 'tiers', ...DEFAULT_FIELDS, ...ALL_PARAMS]

// Rule names become header list members and store keys (`<rule>.<tier>`): keep them plain.
const RULE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$/

/**
 * Validates one entry of `rules`; `undefined` when it has problems (all of them reported).
 * `defaultCostAt` is where `defaults` sets the cost, if it does (a cost no plan admits is reported there).
 */
export function readRule(
  c: Checker,
  index: number,
  rule: unknown,
  defaults: Defaults,
  names: Set<string>,
  defaultCostAt?: Path,
): RuleConfig | undefined {
  const path: Path = ['rules', index]
  if (!c.object(path, rule)) return undefined
  const before = c.issues.length
  c.fields(path, rule, RULE_FIELDS)
  const name = rule.name === undefined ? missing(c, path, 'name') : c.string([...path, 'name'], rule.name)
  if (name !== undefined) {
    if (!RULE_NAME.test(name)) {
      c.add(
        [...path, 'name'],
        'ERR_RULE_NAME',
        `expected 1–48 letters, digits, "-" or "_" (it names headers and store keys), got ${describe(name)}`,
      )
    } else if (names.has(name))
      c.add([...path, 'name'], 'ERR_DUPLICATE_RULE', `rule name "${name}" is used twice`)
    else names.add(name)
  }
  const match = rule.match === undefined ? NO_MATCH : readMatch(c, [...path, 'match'], rule.match)
  const settings = readDefaults(c, path, rule, defaults)
  checkSyncInterval(c, path, rule, settings.consistency)
  const algorithm =
    rule.algorithm === undefined ? missing(c, path, 'algorithm') : readAlgorithm(c, path, rule.algorithm)
  let plans: PlanConfig[] = []
  let tiers: TiersConfig | undefined
  if (algorithm !== undefined) {
    checkParams(c, path, rule, algorithm)
    const own = Object.fromEntries(ALL_PARAMS.filter((p) => rule[p] !== undefined).map((p) => [p, rule[p]]))
    if (rule.tiers === undefined) {
      plans = [{ tier: '', algorithm: spec(algorithm, own) }]
    } else {
      const read = readTiers(c, [...path, 'tiers'], rule.tiers, algorithm, own)
      tiers = read.tiers
      plans = read.plans
    }
    if (name !== undefined && RULE_NAME.test(name)) {
      const costAt = rule.cost !== undefined ? [...path, 'cost'] : (defaultCostAt ?? path)
      for (const plan of plans) {
        const limiter = checkPlan(c, path, name, plan, own)
        if (limiter !== undefined) checkCost(c, costAt, name, plan, limiter, settings.cost)
      }
    }
  }
  if (c.issues.length > before || name === undefined || algorithm === undefined || match === undefined)
    return undefined
  return {
    name,
    match,
    key: settings.key,
    cost: settings.cost,
    plans,
    tiers,
    onStoreError: settings.onStoreError,
    timeout: settings.timeout,
    mode: settings.mode,
    enforce: settings.enforce,
    consistency: settings.consistency,
    syncIntervalMs: settings.syncIntervalMs,
  }
}

/**
 * Refuses a rule's own `syncInterval` when the rule is not approximate (by its own consistency or
 * the one from `defaults`): only approximate rules sync, so it would be ignored, and whoever wrote
 * it would believe the rule batched its store calls. One in `defaults` is taken: it is the
 * interval of the rules that are approximate.
 */
function checkSyncInterval(
  c: Checker,
  path: Path,
  rule: Record<string, unknown>,
  consistency: Defaults['consistency'],
): void {
  if (rule.syncInterval === undefined || consistency === 'approximate') return
  const own = rule.consistency !== undefined
  // A consistency refused already is not taken for the default it falls back to, nor a refused interval.
  if (c.has(own ? [...path, 'consistency'] : ['defaults', 'consistency'], { is: 'ERR_CHOICE' })) return
  if (c.has([...path, 'syncInterval'], { is: 'ERR_DURATION' })) return
  c.add(
    [...path, 'syncInterval'],
    'ERR_SYNC_INTERVAL',
    `needs consistency: approximate, or drop it (only approximate rules sync; this one is "${consistency}"${own ? '' : ', the default'})`,
  )
}
