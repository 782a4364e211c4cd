import type { GatewayConfig, PlanConfig, RuleConfig } from '../config/types.js'

const MAX_LOOP = 30

/** The quota a plan shows (what a fresh client gets before a denial) and a short description. */
function describePlan(plan: PlanConfig): { quota: number; text: string } {
  const o = plan.algorithm.options as Record<string, unknown>
  const per = (n: unknown, d: unknown) => `${n} per ${d ?? '1s'}`
  switch (plan.algorithm.algorithm) {
    case 'token-bucket':
      return {
        quota: Number(o.capacity),
        text: `bursts of ${o.capacity}, +${per(o.refillRate, o.refillInterval)}`,
      }
    case 'leaky-bucket':
      return o.mode === 'shape'
        ? {
            quota: Number(o.capacity) + 1,
            text: `${per(o.leakRate, o.leakInterval)}, up to ${o.capacity} held in a queue`,
          }
        : {
            quota: Number(o.capacity),
            text: `${o.capacity} at once, draining ${per(o.leakRate, o.leakInterval)}`,
          }
    case 'gcra':
      return {
        quota: Number(o.burst ?? o.limit),
        text: `${per(o.limit, o.period)}, bursts of ${o.burst ?? o.limit}`,
      }
    default:
      return { quota: Number(o.limit), text: per(o.limit, o.window) }
  }
}

function concrete(glob: string): string {
  return glob.replace(/\*\*/g, 'demo').replace(/\*/g, 'demo')
}

function curlFor(rule: RuleConfig, base: string, keyValue: string | undefined, tierHeader?: string): string {
  const method = rule.match.methods[0] ?? 'GET'
  const path = concrete(rule.match.paths[0] ?? '/')
  const flags: string[] = []
  if (method !== 'GET') flags.push(`-X ${method}`)
  if (rule.match.hosts[0] !== undefined) flags.push(`-H 'Host: ${concrete(rule.match.hosts[0])}'`)
  for (const [name, value] of rule.match.headers) {
    if (value !== false) flags.push(`-H '${name}: ${value === true ? 'demo' : concrete(value)}'`)
  }
  for (const part of rule.key)
    if (part.kind === 'header') flags.push(`-H '${part.name}: ${keyValue ?? 'demo-key'}'`)
  if (tierHeader !== undefined) flags.push(tierHeader)
  const query = rule.key
    .filter((p) => p.kind === 'query')
    .map((p) => `${(p as { name: string }).name}=${keyValue ?? 'demo'}`)
  return `${flags.join(' ')}${flags.length > 0 ? ' ' : ''}'${base}${path}${query.length > 0 ? `?${query.join('&')}` : ''}'`
}

function loop(count: number, curl: string, shaping: boolean): string {
  const write = shaping ? `'%{http_code} after %{time_total}s\\n'` : `'%{http_code}\\n'`
  return `for i in $(seq ${count}); do curl -s -o /dev/null -w ${write} ${curl}; done`
}

/**
 * What to try against a running gateway, derived from its policy: for each rule, the `curl`
 * commands that trip it (or show its headers, for large quotas).
 *
 * @example console.error(tryLines(config, 'http://127.0.0.1:8080', 'http://127.0.0.1:9090').join('\n'))
 */
export function tryLines(config: GatewayConfig, base: string, admin: string): string[] {
  const lines: string[] = ['Try it:']
  for (const rule of config.rules) {
    const plans = rule.plans.map((p) => ({ plan: p, ...describePlan(p) }))
    const first = plans.find((p) => p.plan.tier === (rule.tiers?.default ?? '')) ?? plans[0]
    if (first === undefined) continue
    const keyText = rule.key.map((p) => ('name' in p ? `${p.kind}:${p.name}` : p.kind)).join(' + ')
    const tiers =
      rule.tiers === undefined ? '' : `; tiers ${plans.map((p) => `${p.plan.tier} (${p.text})`).join(', ')}`
    const mode =
      rule.mode === 'shadow'
        ? ', shadow mode'
        : rule.enforce < 100
          ? `, enforced for ${rule.enforce}% of keys`
          : ''
    const what = rule.tiers === undefined ? first.text : `default tier ${first.plan.tier}`
    lines.push(
      '',
      `  # ${rule.name}: ${first.plan.algorithm.algorithm}, ${what}, per ${keyText}${tiers}${mode}`,
    )
    const shaping = (first.plan.algorithm.options as { mode?: string }).mode === 'shape'
    const count = Math.ceil((first.quota + 1) / Math.max(1, rule.cost))
    const curl = curlFor(rule, base, undefined)
    if (count > MAX_LOOP || rule.cost === 0) {
      lines.push(`  curl -i ${curl}    # see its RateLimit headers`)
      continue
    }
    lines.push(`  ${loop(count, curl, shaping)}`)
    if (rule.mode === 'shadow') lines.push('  # never blocks: the last one logs "shadow: would block" here')
    else if (shaping)
      lines.push('  # held, not refused, until the queue is full: a steady rate reaches the origin')
    else lines.push(`  curl -i ${curl}    # the 429 as problem+json, with Retry-After`)
    const upgrade = [...(rule.tiers?.keys ?? [])].find(([, tier]) => tier !== rule.tiers?.default)
    if (upgrade !== undefined) {
      const [key, tier] = upgrade
      const quota = plans.find((p) => p.plan.tier === tier)?.quota ?? 0
      lines.push(
        `  ${loop(Math.min(count, MAX_LOOP), curlFor(rule, base, key), false)}    # tier ${tier}: ${quota} before a 429`,
      )
    } else if (rule.tiers?.header !== undefined) {
      const other = plans.find((p) => p.plan.tier !== rule.tiers?.default)
      if (other !== undefined) {
        const header = `-H '${rule.tiers.header}: ${other.plan.tier}'`
        lines.push(
          `  ${loop(Math.min(count, MAX_LOOP), curlFor(rule, base, 'other-key', header), false)}    # tier ${other.plan.tier}`,
        )
      }
    }
  }
  lines.push('', `  curl -s ${admin}/metrics | grep edgelimit_decisions_total`)
  return lines
}
