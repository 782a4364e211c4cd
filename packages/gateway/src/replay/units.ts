import { memoryStore } from 'edgelimit'
import { FALLBACK, type PolicyPlan, type PolicyRule } from './policy.js'
import type { LogRecord } from './record.js'
import { type TopKeys, topKeys } from './top-keys.js'

type Bound = ReturnType<ReturnType<typeof memoryStore>['bind']>

/** Rules decided by one store call: alone, or (in shadow) every rule that keys and matches alike. */
interface Unit {
  /** Indexes of its rules in the policy. */
  readonly members: readonly number[]
  /** The first member: its matching, key and plans stand for all. */
  readonly rule: PolicyRule
  /** One store per plan (tier). */
  readonly bound: readonly Bound[]
  readonly options: { readonly shadow: number } | undefined
  readonly cost: number
  readonly enforced: boolean
  readonly requests: TopKeys
  /**
   * The unit counts every request by client address: the parser counts Common Log Format lines
   * per address as it interns them (no map lookup per line), so only the lines it did not count
   * (JSON lines, addresses beyond its table) are counted here.
   */
  readonly byClient: ((ip: string) => string) | undefined
}

/** How the rules of a policy decide each request of a replay. */
export interface RuleRunner {
  /**
   * Decides one request at `now`: 0 when every rule admitted it, 1 when a rule denied it without
   * blocking it (in shadow, or outside its `enforce` share), 2 when a rule blocked it (`enforce` mode).
   */
  decide(r: LogRecord, now: number): 0 | 1 | 2
  /** Requests each rule decided. */
  readonly matched: Float64Array
  /** Requests each rule keyed by client because they lacked a key part (`PolicyRule.mayLack`). */
  readonly fellBack: Float64Array
  /** Each rule's busiest keys (rules of one unit share theirs). */
  readonly requests: readonly TopKeys[]
  /** Requests blocked (`enforce` mode). */
  readonly blocked: number
  /** Folds the parser's per-address counts into the units that count by client. */
  finish(clientCounts: () => ReadonlyMap<string, number>): void
  /** Whether any unit counts by client (the parser must count addresses). */
  readonly countsClients: boolean
}

/**
 * Builds the stores of a policy. In `shadow` mode, rules without tiers or `match` that count by
 * the same key and cost share one store, bound to all of them and called with every rule in
 * shadow: the store then charges each rule only when it admits — the same counts as one store per
 * rule, for one key lookup instead of several. In `enforce` mode each rule has its own store and
 * they are walked in order, as the gateway walks them: the first enforced denial blocks the
 * request before later rules see it.
 */
export function ruleRunner(
  rules: readonly PolicyRule[],
  mode: 'shadow' | 'enforce',
  maxKeys: number,
  onDenied: (rule: number, key: string) => void,
): RuleRunner {
  const groups = new Map<string, number[]>()
  rules.forEach((r, i) => {
    const shareable = mode === 'shadow' && r.matchesAll && r.plans.length === 1
    const id = shareable ? JSON.stringify([r.key, r.cost]) : `rule ${i}`
    const g = groups.get(id) ?? []
    if (g.length === 30) groups.set(`${id} ${i}`, [i])
    else groups.set(id, [...g, i])
  })
  const units: Unit[] = [...groups.values()].map((members) => {
    const rule = rules[members[0] as number] as PolicyRule
    const bound =
      members.length === 1
        ? rule.plans.map((p) => memoryStore({ maxKeys }).bind([p]))
        : [memoryStore({ maxKeys }).bind(members.map((i) => rules[i]?.plans[0] as PolicyPlan))]
    return {
      members,
      rule,
      bound,
      options: members.length === 1 ? undefined : { shadow: (1 << members.length) - 1 },
      cost: rule.cost,
      enforced: mode === 'enforce' && !rule.shadow,
      requests: topKeys(),
      byClient: mode === 'shadow' && rule.matchesAll && rule.plans.length === 1 ? rule.clientKey : undefined,
    }
  })
  // Units in rule order (the gateway's walk), each rule pointing at its unit's counter.
  units.sort((a, b) => (a.members[0] as number) - (b.members[0] as number))
  const requests: TopKeys[] = []
  for (const u of units) for (const i of u.members) requests[i] = u.requests
  const matched = new Float64Array(rules.length)
  const fellBack = new Float64Array(rules.length)
  let blocked = 0

  return {
    decide(r, now) {
      let any: 0 | 1 = 0
      for (const u of units) {
        const route = u.rule.match(r)
        if (route === undefined) continue
        const key = u.rule.keyOf(r, route)
        if (u.byClient === undefined || r.counted !== true) u.requests.add(key)
        const plan = u.bound.length === 1 ? 0 : u.rule.planOf(r, key)
        const verdicts = (u.bound[plan] as Bound).evaluateSync(key, u.cost, now, u.options)
        const members = u.members
        const lacked = u.rule.mayLack.length > 0 && key.startsWith(FALLBACK)
        for (let j = 0; j < members.length; j++) {
          const i = members[j] as number
          matched[i] = (matched[i] as number) + 1
          if (lacked) fellBack[i] = (fellBack[i] as number) + 1
          if ((verdicts[j] as { allowed: boolean }).allowed) continue
          any = 1
          onDenied(i, key)
          // Outside the rule's `enforce` share a denial is a shadow denial: the walk goes on.
          if (u.enforced && u.rule.enforces(r, route, plan)) {
            blocked++
            return 2
          }
        }
      }
      return any
    },
    matched,
    fellBack,
    requests,
    get blocked() {
      return blocked
    },
    countsClients: units.some((u) => u.byClient !== undefined),
    finish(clientCounts) {
      const counting = units.filter((u) => u.byClient !== undefined)
      if (counting.length === 0) return
      const counts = clientCounts()
      for (const u of counting) {
        const keyOf = u.byClient as (ip: string) => string
        // Addresses are usually their own keys (IPv4 kept whole): then the counts are the keys'.
        let same = true
        for (const ip of counts.keys()) {
          if (keyOf(ip) !== ip) {
            same = false
            break
          }
        }
        let byKey = counts
        if (!same) {
          const grouped = new Map<string, number>()
          byKey = grouped
          for (const [ip, n] of counts) {
            const key = keyOf(ip)
            grouped.set(key, (grouped.get(key) ?? 0) + n)
          }
        }
        u.requests.merge(byKey)
      }
    },
  }
}
