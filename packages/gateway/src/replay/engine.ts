import { quoteControls } from '../report/format.js'
import { clfParser } from './clf.js'
import { type JsonFields, jsonParser } from './json-line.js'
import { forEachLine, type Input } from './lines.js'
import { type PolicyRule, REPLAY_MAX_KEYS } from './policy.js'
import { type LogRecord, refusedBeforeRules } from './record.js'
import { reorder } from './reorder.js'
import { timeline } from './timeline.js'
import { type TopKeys, topKeys } from './top-keys.js'
import { ruleRunner } from './units.js'

/** Options of `replayLog`. */
export interface ReplayOptions {
  /** Log files (gzip detected by content), `-` for standard input, or byte streams; read in order. */
  inputs: readonly Input[]
  rules: readonly PolicyRule[]
  /**
   * `shadow`: every rule observes, nothing is blocked, each rule is charged when it admits (what the
   * gateway counts with `mode: shadow`). `enforce`: the rules as the policy says (its `mode: shadow`
   * rules stay in shadow, a rule with `enforce: N` blocks only for the keys in its N % share, as the
   * gateway's limiter picks them), walked as the gateway walks them: each matching rule counts the
   * request in turn, and the first enforced denial blocks it before later rules see it; any other
   * denial is a shadow denial and the walk goes on. @default 'shadow'
   */
  mode?: 'shadow' | 'enforce'
  /** @default 'auto' (a line starting with `{` is JSON, any other Common/Combined Log Format) */
  format?: 'auto' | 'clf' | 'json'
  /** Where JSON lines keep each field (candidate names). */
  fields?: Partial<JsonFields>
  /**
   * Keys held per rule; beyond it the least recently used key starts fresh. `edgelimit replay`
   * passes the policy's memory store bound (`keysHeld`), as serve holds them. @default 1_000_000
   */
  maxKeys?: number
  /** Keys listed per top list. @default 10 */
  top?: number
  /** Malformed lines quoted in the report (all are counted). @default 20 */
  examples?: number
  /**
   * How far back in time a line may be and still be put back in order (0: decide in file order).
   * Later lines are decided at the latest time seen (`late`). @default 120_000
   */
  reorderMs?: number
  /** Most lines held for reordering (memory bound). @default 200_000 */
  reorderMaxHeld?: number
  /** Called every 65,536 lines and at the end. */
  onProgress?: (p: { lines: number; bytes: number; input: number }) => void
}

/** One rule's outcome over the whole log. */
export interface RuleReport {
  readonly name: string
  /** One entry per plan (tier); a rule without tiers has one, with tier `''`. */
  readonly plans: readonly { tier: string; algorithm: string; options: Readonly<Record<string, unknown>> }[]
  readonly key: readonly string[]
  readonly shadow: boolean
  /** Requests the rule applied to (in `enforce` mode, that reached it). */
  readonly matched: number
  /**
   * Requests that lacked a key part the rule reads (a header or query parameter, the host: an
   * access log carries no header but the user agent) and were keyed by client, as the gateway
   * keys them.
   */
  readonly fellBack: number
  /** Requests the rule denied (would have blocked, in shadow). */
  readonly denied: number
  readonly firstDeniedAt: number | undefined
  /** Keys with at least one denial: exact while `deniedKeysExact`. */
  readonly deniedKeys: number
  readonly deniedKeysExact: boolean
  /**
   * `[key, denials, maxUndercount, requests]`, most denied first; `requests` is null for a key
   * the request counter no longer holds (beyond 100,000 distinct keys).
   */
  readonly topDenied: [string, number, number, number | null][]
  /** `[key, requests, maxUndercount]`, busiest first. */
  readonly topKeys: [string, number, number][]
}

/** A malformed line: where, why, and its beginning. */
export interface MalformedLine {
  readonly input: string
  readonly line: number
  readonly reason: string
  readonly text: string
}

/** Everything `replayLog` found. */
export interface ReplayResult {
  readonly mode: 'shadow' | 'enforce'
  readonly lines: number
  readonly requests: number
  /** Requests denied by at least one rule (in enforce mode, shadow denials included). */
  readonly denied: number
  /** Requests blocked (`enforce` mode only: denied by an enforced rule). */
  readonly blocked: number
  readonly malformed: { count: number; byReason: Record<string, number>; examples: MalformedLine[] }
  /** Lines whose time is before an earlier line's (put back in order within `reorderMs`). */
  readonly outOfOrder: { count: number; maxLagMs: number; reorderMs: number }
  /** Lines older than the time already decided: decided at that time (clamped). */
  readonly late: { count: number; maxLagMs: number }
  readonly firstTs: number | undefined
  readonly lastTs: number | undefined
  readonly rules: RuleReport[]
  /**
   * Series: requests; blocked by any rule (in shadow mode: denied by any rule, what would be
   * blocked); then denied per rule (rule order).
   */
  readonly timeline: { widthMs: number; starts: number[]; series: number[][] }
  readonly elapsedMs: number
}

/**
 * Evaluates a policy over access logs with the logs' own timestamps, streaming in constant memory.
 * Lines are decided in file order; a line older than one before it is decided at the latest time
 * seen (and counted in `outOfOrder`). Malformed lines are skipped, counted and quoted, never fatal.
 *
 * @example
 * const result = await replayLog({ inputs: ['access.log.gz'], rules: await loadPolicy('policy.yaml') })
 */
export async function replayLog(options: ReplayOptions): Promise<ReplayResult> {
  const started = performance.now()
  const rules = options.rules
  const mode = options.mode ?? 'shadow'
  const format = options.format ?? 'auto'
  const maxKeys = options.maxKeys ?? REPLAY_MAX_KEYS
  const exampleLimit = options.examples ?? 20
  const n = rules.length
  const denied = new Float64Array(n)
  const firstDenied: (number | undefined)[] = rules.map(() => undefined)
  const topDenied = rules.map(() => topKeys())
  const line = timeline(2 + n)
  const malformed = { count: 0, byReason: {} as Record<string, number>, examples: [] as MalformedLine[] }
  const runner = ruleRunner(rules, mode, maxKeys, noteDenied)
  const needs = {
    ua: rules.some((r) => r.needs.ua),
    query: rules.some((r) => r.needs.query),
    countClients: runner.countsClients,
  }
  const clf = clfParser(needs)
  const json = jsonParser(options.fields, needs)
  const reorderMs = options.reorderMs ?? 120_000
  let lines = 0
  let requests = 0
  let deniedAny = 0
  // Times (epoch ms) are past the small-integer range: kept in a typed array, a new value costs
  // no heap number (as a closure variable, every assignment would allocate one).
  const t = new Float64Array(5)
  const NOW = 0
  /** The latest time seen (the last line's time, in time order). */
  const NEWEST = 1
  const FIRST = 2
  const MAX_LAG = 3
  const MAX_LATE = 4
  t[NOW] = t[NEWEST] = Number.NEGATIVE_INFINITY
  t[FIRST] = Number.POSITIVE_INFINITY
  let outOfOrder = 0
  let late = 0
  let bytes = 0
  let inputIndex = 0
  let inputName = ''

  const bad = (buf: Buffer, s: number, e: number, lineNo: number, reason: string) => {
    malformed.count++
    malformed.byReason[reason] = (malformed.byReason[reason] ?? 0) + 1
    if (malformed.examples.length < exampleLimit) {
      // Quoted on a terminal: control characters (an ANSI escape in a forged line) are shown, not run.
      const text = quoteControls(buf.toString('utf8', s, Math.min(e, s + 160)))
      malformed.examples.push({ input: inputName, line: lineNo, reason, text })
    }
  }

  const decide = (r: LogRecord) => {
    requests++
    const ts = r.ts
    const was = t[NOW] as number
    if (ts < was) {
      late++
      if (was - ts > (t[MAX_LATE] as number)) t[MAX_LATE] = was - ts
    } else t[NOW] = ts
    const now = t[NOW] as number
    line.add(now, 0)
    const verdict = runner.decide(r, now)
    if (verdict !== 0) {
      deniedAny++
      // What the headline counts: blocked in enforce mode, would be blocked in shadow.
      if (verdict === 2 || mode === 'shadow') line.add(now, 1)
    }
  }

  function noteDenied(i: number, key: string) {
    const now = t[NOW] as number
    denied[i] = (denied[i] as number) + 1
    if (firstDenied[i] === undefined) firstDenied[i] = now
    ;(topDenied[i] as TopKeys).add(key)
    line.add(now, 2 + i)
  }

  const buffer = reorderMs > 0 ? reorder(reorderMs, options.reorderMaxHeld ?? 200_000, decide) : undefined
  const accept = (r: LogRecord) => {
    const ts = r.ts
    const newest = t[NEWEST] as number
    if (ts < newest) {
      outOfOrder++
      if (newest - ts > (t[MAX_LAG] as number)) t[MAX_LAG] = newest - ts
      if (ts < (t[FIRST] as number)) t[FIRST] = ts
    } else {
      t[NEWEST] = ts
      if (ts < (t[FIRST] as number)) t[FIRST] = ts
    }
    if (buffer === undefined) decide(r)
    else buffer.push(r)
  }

  const onLine = (buf: Buffer, start: number, e: number, lineNo: number) => {
    lines++
    if ((lines & 0xffff) === 0) options.onProgress?.({ lines, bytes, input: inputIndex })
    // Indentation (a JSON line written with leading spaces or a tab) is no part of the line.
    let s = start
    while (s < e && (buf[s] === 0x20 || buf[s] === 0x09)) s++
    const isJson = format === 'json' || (format === 'auto' && buf[s] === 0x7b)
    const why = isJson ? json.parse(buf.toString('utf8', s, e)) : clf.parse(buf, s, e)
    const record = isJson ? json.record : clf.record
    // A request the gateway answers before its rules (a scanner's CONNECT or `/%zz`) charges no one.
    const refused = why === undefined ? refusedBeforeRules(record) : undefined
    if (why !== undefined) bad(buf, s, e, lineNo, why)
    else if (refused !== undefined) bad(buf, s, e, lineNo, refused)
    else accept(record)
  }

  for (const input of options.inputs) {
    inputName = typeof input === 'string' ? input : `input ${inputIndex + 1}`
    await forEachLine(
      input,
      onLine,
      (lineNo) => {
        lines++
        const reason = 'line longer than 1 MiB'
        malformed.count++
        malformed.byReason[reason] = (malformed.byReason[reason] ?? 0) + 1
        if (malformed.examples.length < exampleLimit)
          malformed.examples.push({ input: inputName, line: lineNo, reason, text: '' })
      },
      (b) => {
        bytes += b
      },
    )
    inputIndex++
  }
  buffer?.drain()
  runner.finish(() => clf.clientCounts())
  options.onProgress?.({ lines, bytes, input: inputIndex })
  const top = options.top ?? 10
  // Rules decided together share one counter of requests: listed once.
  const busiest = new Map<TopKeys, [string, number, number][]>()
  const busiestOf = (t: TopKeys) => {
    let list = busiest.get(t)
    if (list === undefined) {
      list = t.top(top)
      busiest.set(t, list)
    }
    return list
  }
  return {
    mode,
    lines,
    requests,
    denied: deniedAny,
    malformed,
    outOfOrder: { count: outOfOrder, maxLagMs: t[MAX_LAG] as number, reorderMs },
    late: { count: late, maxLagMs: t[MAX_LATE] as number },
    firstTs: requests === 0 ? undefined : t[FIRST],
    lastTs: requests === 0 ? undefined : t[NEWEST],
    blocked: runner.blocked,
    rules: rules.map((r, i) => ({
      name: r.name,
      plans: r.plans.map((p) => ({
        tier: p.tier,
        algorithm: p.algorithm.algorithm,
        options: p.algorithm.options,
      })),
      key: r.key,
      shadow: mode === 'shadow' || r.shadow,
      matched: runner.matched[i] as number,
      fellBack: runner.fellBack[i] as number,
      denied: denied[i] as number,
      firstDeniedAt: firstDenied[i],
      deniedKeys: (topDenied[i] as TopKeys).distinct,
      deniedKeysExact: (topDenied[i] as TopKeys).exact,
      topDenied: (topDenied[i] as TopKeys)
        .top(top)
        .map(([k, n, err]) => [k, n, err, (runner.requests[i] as TopKeys).count(k) ?? null]),
      topKeys: busiestOf(runner.requests[i] as TopKeys),
    })),
    timeline: line.snapshot(),
    elapsedMs: performance.now() - started,
  }
}
