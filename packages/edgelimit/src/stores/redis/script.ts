import { gcd } from '../../core/math.js'
import type { Policy } from '../../core/types.js'
import fixedWindowLua from './scripts/fixed-window.lua'
import libLua from './scripts/lib.lua'
import mainLua from './scripts/main.lua'
import meterLua from './scripts/meter.lua'
import slidingLogLua from './scripts/sliding-log.lua'
import slidingWindowLua from './scripts/sliding-window.lua'
import tatLua from './scripts/tat.lua'

/** An algorithm file split into its sections (see main.lua). */
interface Template {
  readonly params: readonly string[]
  readonly read: string
  readonly decide: string
  readonly write: string
}

function sections(text: string, marker: string): Map<string, string> {
  const out = new Map<string, string>()
  let name: string | undefined
  let lines: string[] = []
  for (const line of text.split('\n')) {
    if (line.startsWith(marker)) {
      if (name !== undefined) out.set(name, lines.join('\n').trim())
      name = line.slice(marker.length).trim()
      lines = []
    } else if (name !== undefined) {
      lines.push(line)
    }
  }
  if (name !== undefined) out.set(name, lines.join('\n').trim())
  return out
}

function template(text: string): Template {
  const params = /^--@params (.+)$/m.exec(text)?.[1]?.trim().split(/\s+/) ?? []
  const parts = sections(text.replace(/^--@params .*$/m, ''), '--@')
  return {
    params,
    read: parts.get('read') ?? '',
    decide: parts.get('decide') ?? '',
    write: parts.get('write') ?? '',
  }
}

const TEMPLATES = {
  fixedWindow: template(fixedWindowLua),
  slidingWindow: template(slidingWindowLua),
  slidingLog: template(slidingLogLua),
  meter: template(meterLua),
  tat: template(tatLua),
}
const HELPERS = sections(libLua, '--@helper ')

/** How one rule runs in Lua: its template and numeric params (in the template's order). */
interface LuaRule {
  readonly template: Template
  readonly params: readonly number[]
}

function luaRule(policy: Policy): LuaRule {
  switch (policy.algorithm) {
    case 'fixed-window':
      return { template: TEMPLATES.fixedWindow, params: [policy.limit, policy.windowMs] }
    case 'sliding-window':
      return { template: TEMPLATES.slidingWindow, params: [policy.limit, policy.windowMs] }
    case 'sliding-log':
      return { template: TEMPLATES.slidingLog, params: [policy.limit, policy.windowMs] }
    case 'token-bucket':
      return meterRule(policy.capacity, policy.refillRate, policy.refillIntervalMs)
    case 'leaky-bucket':
      return policy.mode === 'police'
        ? meterRule(policy.capacity, policy.leakRate, policy.leakIntervalMs)
        : tatRule(policy.leakRate, policy.leakIntervalMs, policy.capacity + 1, 1)
    case 'gcra':
      return tatRule(policy.limit, policy.periodMs, policy.burst, 0)
  }
}

/** The exact fixed-point scale, as the core derives it (core/bucket.ts). */
function meterRule(capacity: number, rate: number, intervalMs: number): LuaRule {
  const g = gcd(rate, intervalMs)
  return { template: TEMPLATES.meter, params: [capacity, intervalMs / g, rate / g] }
}

/** Steps of 1/k ms that make T exact, as the core derives them (core/tat.ts). */
function tatRule(count: number, intervalMs: number, slots: number, shape: number): LuaRule {
  const g = gcd(count, intervalMs)
  return { template: TEMPLATES.tat, params: [count / g, intervalMs / g, slots, shape] }
}

/** A limiter's rules compiled to one script and its constant arguments. */
export interface CompiledScript {
  /** The whole script: the helpers it uses, then main.lua with every rule's sections inlined. */
  readonly text: string
  /** ARGV[2..P+1]: every rule's params in order. */
  readonly params: readonly string[]
}

const indent = (text: string, by: string) =>
  text
    .split('\n')
    .map((l) => (l === '' ? l : by + l))
    .join('\n')

/**
 * Rule-scoped names. Up to LOCAL_RULES rules each value is a Lua local (`limit_1`); beyond, they
 * live in two tables (`V[3]`, `PV[1]`), since a Lua function holds at most 200 locals.
 */
const LOCAL_RULES = 8

/**
 * Builds the script that evaluates a batch of decisions over all of a limiter's rules: main.lua
 * with each rule's sections inlined (no function defined or table built per decision, except the
 * sliding log's entries). Params stay in ARGV, so limiters with the same algorithms in the same
 * order share one script on the server.
 */
export function compileScript(policies: readonly Policy[]): CompiledScript {
  const rules = policies.map(luaRule)
  const count = rules.length
  const inTables = count > LOCAL_RULES
  const slots = new Map<string, string>()
  const slot = (table: string, n: number, x: string) => {
    const id = `${table}${n}:${x}`
    let s = slots.get(id)
    if (s === undefined) {
      s = inTables
        ? `${table}[${[...slots.keys()].filter((k) => k.startsWith(table)).length + 1}]`
        : `${x}_${n}`
      slots.set(id, s)
    }
    return s
  }
  const names = (t: Template) => {
    const all = new Set<string>()
    for (const s of [t.read, t.decide, t.write]) {
      for (const m of s.matchAll(/\$([A-Za-z_]\w*)/g)) all.add(m[1] as string)
    }
    for (const p of t.params) all.delete(p)
    all.delete('key')
    return [...all]
  }
  /** `$name` of rule n → its local or table slot, COST → `cost`, in a block of its own. */
  const instantiate = (r: LuaRule, section: string, n: number, cost: string) => {
    const body = section
      .replace(/\$([A-Za-z_]\w*)/g, (_, x: string) =>
        x === 'key' ? `KEYS[b + ${n}]` : slot(r.template.params.includes(x) ? 'PV' : 'V', n, x),
      )
      .replace(/\bCOST\b/g, cost)
    return `do\n${indent(body, '  ')}\nend`
  }
  const v = (n: number, x: string) => slot('V', n, x)

  let argv = 1
  const params = rules
    .map((r, i) =>
      r.template.params
        .map((p) => `${inTables ? '' : 'local '}${slot('PV', i + 1, p)} = tonumber(ARGV[${++argv}])`)
        .join('\n'),
    )
    .join('\n')
  const read = rules
    .map((r, i) => {
      const n = i + 1
      const locals = names(r.template).map((x) => v(n, x))
      const block = instantiate(r, r.template.read, n, 'cost')
      return inTables ? block : `local ${locals.join(', ')}\n${block}`
    })
    .join('\n')
  const decide = rules.map((r, i) => instantiate(r, r.template.decide, i + 1, 'cost')).join('\n')
  const isShadow = (n: number) => `(shadow ~= nil and string.byte(shadow, ${n}) == 49)`
  const allowed = rules.map((_, i) => `(${v(i + 1, 'code')} == 0 or ${isShadow(i + 1)})`).join(' and ')
  // With one rule, a denial that blocks leaves no admitting rule to report again.
  const redecide =
    count === 1
      ? '-- (one rule: nothing to report again)'
      : rules
          .map(
            (r, i) =>
              `if ${v(i + 1, 'code')} == 0 then\n${indent(instantiate(r, r.template.decide, i + 1, '0'), '  ')}\nend`,
          )
          .join('\n')
  // Every charged rule's TTL checked before the first write, then the writes until one is refused.
  // Here every enforced rule admitted, or the charge is forced: a rule that denies is charged
  // unless it is in shadow.
  const charged = (n: number) => `(${v(n, 'code')} == 0 or not ${isShadow(n)})`
  const write = [
    ...rules.map(
      (_, i) => `if not err and ${charged(i + 1)} then err = ttlerr(${v(i + 1, 'ttl')} + slack) end`,
    ),
    ...rules.map(
      (r, i) =>
        `if not err and ${charged(i + 1)} then\n${indent(instantiate(r, r.template.write, i + 1, 'cost'), '  ')}\nend`,
    ),
  ].join('\n')
  const emit = rules
    .map((_, i) => {
      const n = i + 1
      const at = (j: number) => `out[o + ${i * 4 + j}]`
      return `${at(1)}, ${at(2)}, ${at(3)}, ${at(4)} = ${v(n, 'code')}, ${v(n, 'rem')}, ${v(n, 'reset')}, ${v(n, 'x')}`
    })
    .join('\n')
  const parts: Record<string, string> = {
    params: inTables ? `local V, PV = {}, {}\n${params}` : params,
    read,
    decide,
    redecide,
    write,
    emit,
  }
  let body = mainLua
    .replace(/^( *)--@(\w+)$/gm, (line, pad: string, part: string) =>
      part in parts ? indent(parts[part] as string, pad) : line,
    )
    .replace(/\bARGV_BASE\b/g, String(argv))
    .replace(/\bRULE_COUNT\b/g, String(count))
    .replace(/\bALLOWED\b/, allowed)
  // The helpers the code names (and the helpers they name), in lib.lua's order.
  const used = new Set<string>()
  for (let grew = true; grew; ) {
    grew = false
    const text = body + [...used].map((h) => HELPERS.get(h)).join('\n')
    for (const name of HELPERS.keys()) {
      if (!used.has(name) && new RegExp(`\\b${name}\\(`).test(text)) {
        used.add(name)
        grew = true
      }
    }
  }
  const helpers = [...HELPERS.keys()].filter((h) => used.has(h)).map((h) => HELPERS.get(h))
  body = [...helpers, body].join('\n\n')
  return { text: body, params: rules.flatMap((r) => r.params.map(String)) }
}
