import { counted, duration, int, pct, table } from '../report/format.js'
import { escapeHtml, htmlTable, PALETTE, type Report, renderReport, type Section } from '../report/html.js'
import type { AlgorithmResult, SimulationResult } from './engine.js'

const HEADERS = [
  'algorithm',
  'admitted',
  'denied',
  'most in any window',
  'vs limit',
  'false blocks',
  'misses',
  'first block',
]
const ALIGN = ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'] as const

function row(a: AlgorithmResult): string[] {
  return [
    a.label,
    int(a.admitted),
    int(a.denied),
    `${int(a.maxInSpan.count)} / ${int(a.limit)}`,
    `${(a.maxInSpan.count / a.limit).toFixed(2)}×`,
    a.falseBlocks === 0 ? '0' : `${int(a.falseBlocks)} (${pct(a.falseBlocks, a.matched)})`,
    a.misses === 0 ? '0' : `${int(a.misses)} (${pct(a.misses, a.matched)})`,
    a.firstBlockMs === undefined ? '—' : duration(a.firstBlockMs),
  ]
}

function groupsLine(a: AlgorithmResult): string {
  return Object.entries(a.byGroup)
    .map(([g, v]) => `${g} ${int(v.admitted)}/${int(v.admitted + v.denied)}`)
    .join(', ')
}

function heading(r: SimulationResult): string {
  return `${r.scenario}: ${counted(r.requests, 'request')} from ${counted(r.clients, 'client')} over ${duration(r.durationMs)}; limit ${int(r.limit)} per ${duration(r.windowMs)}`
}

/** The terminal table of one simulation, with the admitted share per client group. */
export function textTable(r: SimulationResult): string {
  const lines = [
    heading(r),
    r.description,
    '',
    table(HEADERS, r.algorithms.map(row), ALIGN),
    '',
    'admitted / offered by group:',
  ]
  for (const a of r.algorithms) lines.push(`  ${a.label.padEnd(24)} ${groupsLine(a)}`)
  const shaped = r.algorithms.filter((a) => a.delay.max > 0)
  for (const a of shaped)
    lines.push(`  ${a.label}: shaped, delays up to ${duration(a.delay.max)} (mean ${duration(a.delay.mean)})`)
  return `${lines.join('\n')}\n`
}

const NOTE = `<p class="note">"most in any window": the most one key got admitted in any span of the window (a request counts
while now − its time &lt; window, the sliding log's own rule; shaped requests count when released). "false blocks" and "misses":
decisions that differ from the exact sliding log of the same limit and window, each run over the same requests.</p>`

/** The sections of one simulation: its table, then admitted and denied over time per algorithm. */
export function simulationSection(r: SimulationResult, index: number): Section {
  const x = { kind: 'seconds' as const, values: r.starts.map((s) => s / 1000) }
  const per = duration(r.bucketMs)
  const overview = {
    id: `s${index}-admitted`,
    title: `Admitted per ${per}, every algorithm (offered in grey)`,
    x,
    yLabel: 'requests',
    series: [
      { label: 'offered', color: '#999999', values: r.offered },
      ...r.algorithms.map((a, i) => ({
        label: a.label,
        color: PALETTE[i % PALETTE.length] as string,
        values: a.timeline.admitted,
      })),
    ],
  }
  const charts = r.algorithms.map((a) => ({
    id: `s${index}-${a.id}`,
    title: `${a.label}: admitted and denied per ${per}`,
    x,
    yLabel: 'requests',
    series: [
      { label: 'admitted', color: '#2ca02c', values: a.timeline.admitted, fill: true },
      { label: 'denied', color: '#d62728', values: a.timeline.denied, fill: true },
    ],
  }))
  const groups = htmlTable(
    ['algorithm', ...Object.keys(r.algorithms[0]?.byGroup ?? {}).map((g) => `${g}: admitted / offered`)],
    r.algorithms.map((a) => [
      a.label,
      ...Object.values(a.byGroup).map((v) => `${int(v.admitted)} / ${int(v.admitted + v.denied)}`),
    ]),
    ['l', ...Object.keys(r.algorithms[0]?.byGroup ?? {}).map(() => 'r')],
  )
  return {
    title: heading(r),
    html: `<p>${escapeHtml(r.description)}</p>${htmlTable(HEADERS, r.algorithms.map(row), ALIGN)}${NOTE}${groups}`,
    charts: [overview, ...charts],
  }
}

/** The HTML report of one or more simulations. */
export function htmlReport(results: readonly SimulationResult[]): string {
  const report: Report = {
    title: 'edgelimit simulate',
    subtitle: `${results.length} scenario${results.length === 1 ? '' : 's'}: ${results.map((r) => r.scenario).join(', ')}. Every algorithm saw the same requests on a simulated clock.`,
    sections: results.map(simulationSection),
    data: { kind: 'simulate', results },
  }
  return renderReport(report)
}
