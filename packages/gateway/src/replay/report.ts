import { counted, duration, int, isoTime, pct, table } from '../report/format.js'
import { escapeHtml, htmlTable, PALETTE, type Report, renderReport } from '../report/html.js'
import type { ReplayResult, RuleReport } from './engine.js'
import { lackableParts } from './policy.js'

const BARS = '▁▂▃▄▅▆▇█'

/** A one-line bar chart of a series, at most `width` characters (buckets are summed to fit). */
export function sparkline(values: readonly number[], width = 60): string {
  if (values.length === 0) return ''
  const per = Math.ceil(values.length / width)
  const cells: number[] = []
  for (let i = 0; i < values.length; i += per) cells.push(values.slice(i, i + per).reduce((a, b) => a + b, 0))
  const max = Math.max(...cells)
  return cells.map((v) => (v === 0 ? ' ' : BARS[Math.min(7, Math.floor((v / max) * 7.999))])).join('')
}

function ruleRow(r: RuleReport): string[] {
  const one = r.plans.length === 1 ? r.plans[0] : undefined
  return [
    r.name,
    one?.algorithm ?? r.plans[0]?.algorithm ?? '',
    one !== undefined
      ? optionsText(one.options)
      : r.plans.map((p) => `${p.tier}: ${optionsText(p.options)}`).join('; '),
    r.key.join('+'),
    int(r.matched),
    int(r.denied),
    pct(r.denied, r.matched),
    `${int(r.deniedKeys)}${r.deniedKeysExact ? '' : '+'}`,
    r.firstDeniedAt === undefined ? '—' : isoTime(r.firstDeniedAt),
  ]
}

const RULE_HEADERS = [
  'rule',
  'algorithm',
  'options',
  'key',
  'matched',
  'would block',
  'share',
  'keys blocked',
  'first block',
]
const RULE_ALIGN = ['l', 'l', 'l', 'l', 'r', 'r', 'r', 'r', 'l'] as const

/** `limit=100 window=60s`. */
export function optionsText(o: Readonly<Record<string, unknown>>): string {
  return Object.entries(o)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ')
}

function headline(r: ReplayResult, label: string): string[] {
  const span =
    r.firstTs === undefined || r.lastTs === undefined ? '' : ` (${isoTime(r.firstTs)} … ${isoTime(r.lastTs)})`
  // A log in time order has nothing to qualify: no lag, nothing put back.
  const order =
    r.outOfOrder.count === 0 && r.late.count === 0
      ? 'none out of order'
      : `${int(r.outOfOrder.count)} out of order (up to ${duration(r.outOfOrder.maxLagMs)} early; ` +
        (r.late.count === 0
          ? r.outOfOrder.reorderMs > 0
            ? `all put back in time order within ${duration(r.outOfOrder.reorderMs)})`
            : 'decided in file order at the latest time seen)'
          : `${int(r.late.count)} beyond the ${duration(r.outOfOrder.reorderMs)} reorder window, decided up to ${duration(r.late.maxLagMs)} late)`)
  return [
    `edgelimit replay: ${counted(r.lines, 'line')} from ${label}${span}, ${r.mode} mode`,
    `${counted(r.requests, 'request')} evaluated, ${counted(r.malformed.count, 'malformed line')} skipped; ${order}`,
    r.mode === 'shadow'
      ? `${counted(r.denied, 'request')} (${pct(r.denied, r.requests)}) would have been blocked by at least one rule`
      : `${counted(r.blocked, 'request')} (${pct(r.blocked, r.requests)}) blocked; ${int(r.denied)} denied by at least one rule (shadow rules included)`,
  ]
}

/** The terminal report: summary, a table per rule, top keys, a timeline, malformed lines. */
export function textReport(r: ReplayResult, label: string, top = 10): string {
  const out = [...headline(r, label), '', table(RULE_HEADERS, r.rules.map(ruleRow), RULE_ALIGN)]
  // Keyed by client for want of a header, a query parameter or the host: the counts are by
  // address, which is worth saying (an access log carries no header but the user agent).
  const lacking = r.rules.filter((rule) => rule.fellBack > 0)
  if (lacking.length > 0) out.push('')
  for (const rule of lacking)
    out.push(
      `"${rule.name}": ${int(rule.fellBack)} of ${counted(rule.matched, 'request')} had no ${lackableParts(rule.key).join(' or ')}: keyed by client address (fallback|ip=…), as the gateway keys them`,
    )
  for (const rule of r.rules) {
    if (rule.topDenied.length === 0) continue
    out.push('', `Top keys blocked by "${rule.name}":`)
    out.push(
      table(
        ['key', 'would block', 'requests'],
        rule.topDenied
          .slice(0, top)
          .map(([k, c, err, n]) => [k, err > 0 ? `${int(c)} (+≤${int(err)})` : int(c), requestsOf(n)]),
        ['l', 'r', 'r'],
      ),
    )
  }
  const t = r.timeline
  if (t.starts.length > 0) {
    out.push('', `Timeline (${duration(t.widthMs)} per bucket, ${isoTime(t.starts[0] as number)} onwards):`)
    out.push(`  requests     ${sparkline(t.series[0] ?? [])}`)
    for (const [i, rule] of r.rules.entries()) {
      out.push(`  ${rule.name.slice(0, 12).padEnd(12)} ${sparkline(t.series[2 + i] ?? [])}`)
    }
  }
  if (r.malformed.count > 0) {
    out.push('', `Malformed lines (${int(r.malformed.count)}, skipped):`)
    for (const [reason, count] of Object.entries(r.malformed.byReason))
      out.push(`  ${int(count)} × ${reason}`)
    for (const m of r.malformed.examples)
      out.push(`  ${m.input}:${m.line}: ${m.reason}: ${m.text.slice(0, 100)}`)
    if (r.malformed.count > r.malformed.examples.length)
      out.push(`  … ${int(r.malformed.count - r.malformed.examples.length)} more`)
  }
  return `${out.join('\n')}\n`
}

function requestsOf(requests: number | null): string {
  return requests === null ? '—' : int(requests)
}

/** The HTML report: the same tables plus a timeline chart per rule. */
export function htmlReport(r: ReplayResult, label: string, top = 10): string {
  const t = r.timeline
  const x = { kind: 'time' as const, values: t.starts.map((s) => s / 1000) }
  const perRule = r.rules.map((rule, i) => ({
    id: `rule-${i}`,
    title: `${rule.name}: requests and would-block per ${duration(t.widthMs)}`,
    x,
    yLabel: 'requests',
    series: [
      { label: 'requests', color: PALETTE[0] as string, values: t.series[0] ?? [], fill: true },
      { label: 'would block', color: PALETTE[1] as string, values: t.series[2 + i] ?? [], fill: true },
    ],
  }))
  // Blocked requests in enforce mode; in shadow nothing is, and the series is what would be.
  const anyRule = r.mode === 'enforce' ? 'blocked' : 'would block'
  const overview = {
    id: 'overview',
    title: `All rules: requests, ${r.mode === 'enforce' ? 'blocked' : 'would be blocked'} by any rule, and would-block per rule, per ${duration(t.widthMs)}`,
    x,
    yLabel: 'requests',
    series: [
      { label: 'requests', color: PALETTE[0] as string, values: t.series[0] ?? [] },
      { label: `${anyRule} (any rule)`, color: PALETTE[1] as string, values: t.series[1] ?? [] },
      ...r.rules.map((rule, i) => ({
        label: rule.name,
        color: PALETTE[(i + 2) % PALETTE.length] as string,
        values: t.series[2 + i] ?? [],
      })),
    ],
  }
  const topTables = r.rules
    .map((rule) => {
      const denied = htmlTable(
        ['key', 'would block', 'requests'],
        rule.topDenied.slice(0, top).map(([k, c, , n]) => [k, int(c), requestsOf(n)]),
        ['l', 'r', 'r'],
      )
      const busiest = htmlTable(
        ['key', 'requests'],
        rule.topKeys.slice(0, top).map(([k, c]) => [k, int(c)]),
        ['l', 'r'],
      )
      return `<h3>${escapeHtml(rule.name)}</h3><div style="display:flex;gap:32px;flex-wrap:wrap"><div><p class="note">Most blocked keys</p>${
        rule.topDenied.length === 0 ? '<p class="ok">none blocked</p>' : denied
      }</div><div><p class="note">Busiest keys</p>${busiest}</div></div>`
    })
    .join('')
  const malformed =
    r.malformed.count === 0
      ? '<p class="ok">No malformed lines.</p>'
      : `<p>${int(r.malformed.count)} malformed lines were skipped.</p>${htmlTable(
          ['reason', 'lines'],
          Object.entries(r.malformed.byReason).map(([k, v]) => [k, int(v)]),
          ['l', 'r'],
        )}${htmlTable(
          ['input', 'line', 'reason', 'beginning'],
          r.malformed.examples.map((m) => [m.input, String(m.line), m.reason, m.text.slice(0, 100)]),
          ['l', 'r', 'l', 'l'],
        )}`
  const report: Report = {
    title: 'edgelimit replay',
    subtitle: headline(r, label).join(' · '),
    sections: [
      {
        title: 'Rules',
        html: htmlTable(RULE_HEADERS, r.rules.map(ruleRow), RULE_ALIGN),
        charts: [overview],
      },
      { title: 'Timeline per rule', html: '', charts: perRule },
      { title: 'Top keys', html: topTables, charts: [] },
      { title: 'Malformed lines', html: malformed, charts: [] },
    ],
    data: { kind: 'replay', label, result: r },
  }
  return renderReport(report)
}
