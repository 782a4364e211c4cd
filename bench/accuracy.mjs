// Accuracy of the sliding-window counter against the exact sliding log, by Cloudflare's method.
//
//   npm run bench:accuracy                     (builds edgelimit first)
//   node bench/accuracy.mjs [--requests N] [--limit 100] [--window-ms 60000] [--seed 1] [--quick] [--no-write]
//
// Cloudflare measured their sliding-window approximation on 400 million requests from 270,000
// sources: 0.003 % of requests wrongly allowed or rate limited (and an average difference of 6 %
// between the real and the approximate rate). This runs edgelimit's counter and its exact log on
// a large synthetic trace (bench/accuracy/traffic.mjs) and reports the same figures beside theirs,
// then the same comparison under edgelimit's own semantics (a denied request consumes nothing).
//
// Writes bench/results/accuracy-<YYYY-MM-DD>.json and .md (UTC date).

import { mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { environment, headerLines, mdTable, RESULTS } from './accuracy/env.mjs'
import { measure } from './accuracy/measure.mjs'
import { CLASSES, random } from './accuracy/traffic.mjs'

const CLOUDFLARE = {
  source: 'Cloudflare blog, "How we built rate limiting capable of scaling to millions of domains" (2017)',
  requests: 400_000_000,
  sources: 270_000,
  wrongPct: 0.003,
  meanRateErrorPct: 6,
}

function flag(argv, name, fallback) {
  const i = argv.indexOf(name)
  return i < 0 ? fallback : Number(argv[i + 1])
}

const argv = process.argv.slice(2)
const quick = argv.includes('--quick')
const params = {
  // Cloudflare's scale by default; --quick for a look in seconds.
  requests: flag(argv, '--requests', quick ? 4_000_000 : 400_000_000),
  limit: flag(argv, '--limit', 100),
  windowMs: flag(argv, '--window-ms', 60_000),
  seed: flag(argv, '--seed', 1),
}
const started = Date.now()
const loadBefore = os.loadavg()
let last = 0
const { open, closed } = measure({
  ...params,
  rand: random(params.seed),
  progress(done) {
    if (Date.now() - last < 2000) return
    last = Date.now()
    process.stderr.write(
      `\r${((100 * done) / params.requests).toFixed(0).padStart(3)}% ${done.toLocaleString('en-US')} requests`,
    )
  },
})
process.stderr.write('\r\x1b[K')

const pct = (part, whole, digits = 4) => (whole === 0 ? '—' : `${((100 * part) / whole).toFixed(digits)} %`)
const int = (n) => n.toLocaleString('en-US')
const summary = (t) => ({
  sources: t.sources,
  requests: t.requests,
  wrongAllowed: t.wrongAllowed,
  wrongBlocked: t.wrongBlocked,
  wrongPct: (100 * (t.wrongAllowed + t.wrongBlocked)) / t.requests,
  wrongAllowedPct: (100 * t.wrongAllowed) / t.requests,
  wrongBlockedPct: (100 * t.wrongBlocked) / t.requests,
  meanRateErrorPct: (100 * t.relErrorSum) / t.requests,
  meanAbsoluteError: t.absErrorSum / t.requests,
  sourcesOverThreshold: t.overSources,
  falseNegativeSources: t.falseNegativeSources,
  falsePositiveSources: t.falsePositiveSources,
  worstMissedOverPct: t.worstMissedOverPct,
})
const results = {
  cloudflareMethod: Object.fromEntries(Object.entries(open).map(([k, t]) => [k, summary(t)])),
  edgelimitSemantics: {
    ...closed,
    disagreePct: (100 * (closed.misses + closed.falseBlocks)) / closed.requests,
    missPct: (100 * closed.misses) / closed.requests,
    falseBlockPct: (100 * closed.falseBlocks) / closed.requests,
  },
}
const meta = environment({
  script: 'bench/accuracy.mjs',
  argv,
  started,
  loadBefore,
  dirtyPaths: ['packages/edgelimit', 'bench'],
})
const all = results.cloudflareMethod.all
const e = results.edgelimitSemantics

const md = `# Sliding-window counter accuracy — ${meta.date}

${headerLines(meta).join('\n')}
- Trace: ${int(all.requests)} requests from ${int(all.sources)} synthetic sources (seed ${params.seed}); threshold ${params.limit} requests per ${params.windowMs / 1000} s

## Beside Cloudflare's published figures (every request counted, as they count)

| | Cloudflare (published) | edgelimit (this run) |
| :--- | ---: | ---: |
| requests | ${int(CLOUDFLARE.requests)} | ${int(all.requests)} |
| sources | ${int(CLOUDFLARE.sources)} | ${int(all.sources)} |
| wrongly allowed or blocked | ${CLOUDFLARE.wrongPct} % | ${all.wrongPct.toFixed(4)} % |
| wrongly allowed | — | ${all.wrongAllowedPct.toFixed(4)} % (${int(all.wrongAllowed)}) |
| wrongly blocked | — | ${all.wrongBlockedPct.toFixed(4)} % (${int(all.wrongBlocked)}) |
| mean rate error (\\|estimate − exact\\| / exact) | ${CLOUDFLARE.meanRateErrorPct} % | ${all.meanRateErrorPct.toFixed(2)} % |
| sources over the threshold | — | ${int(all.sourcesOverThreshold)} |
| of those never blocked (false negatives) | 3, each < 15 % over | ${int(all.falseNegativeSources)}${all.falseNegativeSources > 0 ? `, worst ${all.worstMissedOverPct.toFixed(1)} % over` : ''} |
| blocked while never over (false positives) | 0 | ${int(all.falsePositiveSources)} |

By kind of source (the mix is ours: where sources sit relative to the threshold decides how often an approximation can be wrong):

${mdTable(
  [
    'sources',
    'count',
    'requests',
    'wrong',
    'wrongly allowed',
    'wrongly blocked',
    'mean rate error',
    'over threshold',
    'false neg.',
    'false pos.',
  ],
  ['all', ...CLASSES].map((k) => {
    const s = results.cloudflareMethod[k]
    return [
      k,
      int(s.sources),
      int(s.requests),
      `${s.wrongPct.toFixed(4)} %`,
      `${s.wrongAllowedPct.toFixed(4)} %`,
      `${s.wrongBlockedPct.toFixed(4)} %`,
      `${s.meanRateErrorPct.toFixed(2)} %`,
      int(s.sourcesOverThreshold),
      int(s.falseNegativeSources),
      int(s.falsePositiveSources),
    ]
  }),
  ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
)}

## Under edgelimit's semantics (each enforces the limit on its own state; a denied request consumes nothing)

| | sliding-window counter vs exact sliding log |
| :--- | ---: |
| requests | ${int(e.requests)} |
| admitted: counter / log | ${int(e.counterAdmitted)} / ${int(e.logAdmitted)} (${(100 * (e.counterAdmitted / e.logAdmitted - 1)).toFixed(2)} %) |
| decisions that differ (mostly the same requests admitted at other moments, once the two states part) | ${e.disagreePct.toFixed(4)} % |
| admitted by the counter, denied by the log | ${pct(e.misses, e.requests)} (${int(e.misses)}) |
| denied by the counter, admitted by the log | ${pct(e.falseBlocks, e.requests)} (${int(e.falseBlocks)}) |
| sources that pushed past the limit | ${int(e.overshoot.sources)} of ${int(all.sources)} |
| their most admitted in any ${params.windowMs / 1000} s span, over the limit: median / 99th pct / max | ${e.overshoot.medianPct.toFixed(1)} % / ${e.overshoot.p99Pct.toFixed(1)} % / ${e.overshoot.maxPct.toFixed(1)} % |
| sources the counter let over the limit in some span | ${int(e.overLimitSources)} of ${int(all.sources)} |

## Method

- **Counter under test**: edgelimit's \`slidingWindow({ limit, window })\`: \`estimate = cur + floor(prev × (W − e) / W)\` over epoch-aligned windows (Cloudflare's formula without the floor). **Reference**: edgelimit's \`slidingLog\`, exact (a request counts while \`now − t < W\`). Both are the built library's memory store, called through \`evaluateSync\` with each request's time.
- **Cloudflare's method** (every request counted, admitted or not, as their rate limiting counts): at each request the counter's estimate and the exact count of the same source's requests in the last window are read (from rules whose limit nothing reaches, via \`remaining\`); the request would be allowed iff count + 1 ≤ limit. *Wrongly allowed*: the estimate allows, the exact count does not; *wrongly blocked*: the reverse. *Mean rate error*: mean over requests of |estimate − exact| / (exact + 1), the current request included. A source is a *false negative* when its exact rate went over the threshold but the estimate never blocked it, a *false positive* when the estimate blocked it but its exact rate never went over.
- **edgelimit semantics**: the counter and the log each enforce the limit on their own state; their decisions on the same requests are compared. Once one admits a request the other denies, their states differ and later decisions shift in time, so the share of differing decisions overstates the error: the admitted totals and the overshoot (the counter's most admitted to one source in any window span, against the limit; the log's is the limit, exactly) are the measures to read.
- **Trace** (bench/accuracy/traffic.mjs): sources drawn until ${int(params.requests)} requests: 60 % quiet (Poisson at 0.02–0.5× the threshold rate), 25 % bursty (on/off: ~1 min bursts at 0.8–3×, ~5 min pauses at 0.05×), 15 % heavy (Poisson at 0.5–5×); each active 10–60 minutes from a random phase of the window grid; times in whole ms. Sources run one after another on one clock (keys are independent). Cloudflare's figure comes from their production traffic, whose mix is not published: compare orders of magnitude, and see the per-kind table for how the mix moves the figure.
- Cloudflare's figures: ${CLOUDFLARE.source}: ${int(CLOUDFLARE.requests)} requests from ${int(CLOUDFLARE.sources)} sources, ${CLOUDFLARE.wrongPct} % wrongly allowed or rate limited, ${CLOUDFLARE.meanRateErrorPct} % average difference between real and approximate rate, 3 sources allowed while slightly over (under 15 %), no source blocked below the threshold.
`

process.stdout.write(`${md}\n`)
if (!argv.includes('--no-write')) {
  mkdirSync(RESULTS, { recursive: true })
  const base = path.join(RESULTS, `accuracy-${meta.date}`)
  writeFileSync(
    `${base}.json`,
    `${JSON.stringify({ benchmark: 'accuracy', ...meta, params, cloudflare: CLOUDFLARE, results }, null, 2)}\n`,
  )
  writeFileSync(`${base}.md`, md)
  process.stderr.write(`wrote ${base}.json and .md\n`)
}
