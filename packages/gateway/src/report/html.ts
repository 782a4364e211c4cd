import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'

/** One line (or filled area) of a chart. */
export interface SeriesSpec {
  readonly label: string
  readonly color: string
  readonly values: readonly number[]
  /** Fill the area under the line. @default false */
  readonly fill?: boolean
}

/** A chart: x values shared by every series. */
export interface ChartSpec {
  /** Unique in the page; `window.__edgelimitCharts[id]` is its uPlot instance. */
  readonly id: string
  readonly title: string
  /** `time`: x holds epoch seconds (shown as dates); `seconds`: x holds seconds from the start. */
  readonly x: { readonly kind: 'time' | 'seconds'; readonly values: readonly number[] }
  readonly yLabel: string
  readonly series: readonly SeriesSpec[]
  /** Draw steps (counts per bucket) rather than lines. @default true */
  readonly stepped?: boolean
}

/** A part of the report: a heading, trusted HTML (tables, built with `escapeHtml`), charts. */
export interface Section {
  readonly title: string
  readonly html: string
  readonly charts: readonly ChartSpec[]
}

/** Everything on the page. `data` is embedded as JSON (`#edgelimit-data`) for tools and tests. */
export interface Report {
  readonly title: string
  readonly subtitle: string
  readonly sections: readonly Section[]
  readonly data: unknown
}

/** Colours by position, readable on white. */
export const PALETTE = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#17becf',
  '#7f7f7f',
  '#bcbd22',
]

/** Escapes text for HTML content and attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** A table in HTML; cells are text (escaped here). `align` per column: `l` or `r`. */
export function htmlTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly string[] = [],
) {
  const cell = (tag: string, c: string, i: number) =>
    `<${tag}${align[i] === 'r' ? ' class="num"' : ''}>${escapeHtml(c)}</${tag}>`
  return `<table><thead><tr>${headers.map((h, i) => cell('th', h, i)).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c, i) => cell('td', c, i)).join('')}</tr>`)
    .join('')}</tbody></table>`
}

let assets: { js: string; css: string } | undefined

/** uPlot's script and stylesheet, read once from node_modules to be inlined (no network). */
export function uplot(): { js: string; css: string } {
  if (assets === undefined) {
    const require = createRequire(import.meta.url)
    const dir = path.dirname(require.resolve('uplot/dist/uPlot.iife.min.js'))
    assets = {
      js: readFileSync(path.join(dir, 'uPlot.iife.min.js'), 'utf8'),
      css: readFileSync(path.join(dir, 'uPlot.min.css'), 'utf8'),
    }
  }
  return assets
}

/** Serialises for a `<script>` element: no `</script>` or `<!--` can close it early. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029')
}

/**
 * Renders a self-contained HTML page: uPlot inlined, data embedded, no external request.
 * In the page, `window.__edgelimitCharts` maps chart ids to uPlot instances and
 * `document.body.dataset.ready` is `"true"` once every chart is drawn.
 */
export function renderReport(report: Report): string {
  const { js, css } = uplot()
  const charts = report.sections.flatMap((s) => s.charts)
  const body = report.sections
    .map(
      (s) =>
        `<section><h2>${escapeHtml(s.title)}</h2>${s.html}${s.charts
          .map(
            (c) =>
              `<figure><figcaption>${escapeHtml(c.title)}</figcaption><div class="chart" id="${escapeHtml(c.id)}"></div></figure>`,
          )
          .join('')}</section>`,
    )
    .join('\n')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>${escapeHtml(report.title)}</title>
<style>${css}</style>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555;margin:0 0 16px}table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border-bottom:1px solid #e4e4e4;padding:4px 10px;text-align:left;vertical-align:top}th{background:#f6f6f6}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}figure{margin:8px 0 20px}
figcaption{font-weight:600;margin-bottom:4px}.note{color:#555;font-size:13px}code{background:#f3f3f3;padding:0 3px}
.bad{color:#b00020}.ok{color:#0a7d32}
</style></head>
<body>
<h1>${escapeHtml(report.title)}</h1>
<p class="sub">${escapeHtml(report.subtitle)}</p>
${body}
<script type="application/json" id="edgelimit-charts">${scriptJson(charts)}</script>
<script type="application/json" id="edgelimit-data">${scriptJson(report.data)}</script>
<script>${js}</script>
<script>
(function () {
  var specs = JSON.parse(document.getElementById('edgelimit-charts').textContent);
  var charts = {};
  window.__edgelimitCharts = charts;
  specs.forEach(function (c) {
    var el = document.getElementById(c.id);
    var paths = c.stepped === false ? undefined : uPlot.paths.stepped({ align: 1 });
    var series = [{ label: c.x.kind === 'time' ? 'time' : 'seconds' }].concat(c.series.map(function (s) {
      return { label: s.label, stroke: s.color, width: 1.5, fill: s.fill ? s.color + '33' : undefined, paths: paths,
        points: { show: false } };
    }));
    var data = [c.x.values].concat(c.series.map(function (s) { return s.values; }));
    charts[c.id] = new uPlot({
      width: Math.max(320, el.clientWidth || 1000), height: 260,
      scales: { x: { time: c.x.kind === 'time' }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; } } },
      axes: [{ label: c.x.kind === 'time' ? '' : 'seconds' }, { label: c.yLabel, size: 60 }],
      series: series, legend: { live: true }
    }, data, el);
  });
  document.body.dataset.ready = 'true';
})();
</script>
</body></html>
`
}
