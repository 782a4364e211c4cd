// Latency at a fixed request rate (open loop), for several targets in the same time window:
// bench/gateway.mjs runs it in its own process.
//   node bench/gateway/probe.mjs <requests per second per target> <seconds> <warm-up seconds> <url>...
// Requests go to the targets in turn, evenly spaced and in rotating order, so a burst of machine
// load hits every target alike. Each request is timed from the moment it was due, not from when it was sent, so a
// stalled server shows up as latency (no coordinated omission). Prints one JSON line per target,
// in milliseconds, with every sample (for pooling over rounds).
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

// The gateway's own undici (the version edgelimit serve runs on).
const { Pool } = createRequire(new URL('../../packages/gateway/package.json', import.meta.url))('undici')

const [rateText, secondsText, warmupText, ...urls] = process.argv.slice(2)
const rate = Number(rateText)
const seconds = Number(secondsText)
const warmup = Number(warmupText)
const targets = urls.map((url) => {
  const u = new URL(url)
  return {
    url,
    path: u.pathname,
    pool: new Pool(u.origin, { connections: 32 }),
    latencies: [],
    errors: 0,
    non2xx: 0,
  }
})
const interval = 1000 / (rate * targets.length)
const total = Math.round(rate * targets.length * (seconds + warmup))
const warm = rate * targets.length * warmup
let sent = 0
let done = 0

function fire(index) {
  const due = start + index * interval
  // Each round of requests starts one target later, so that every target takes every place in
  // the order equally often (the origin and this probe serve them in arrival order).
  const n = targets.length
  const target = targets[(index + Math.floor(index / n)) % n]
  target.pool
    .request({ path: target.path, method: 'GET' })
    .then(async ({ statusCode, body }) => {
      await body.dump()
      if (statusCode < 200 || statusCode > 299) target.non2xx++
      if (index >= warm) target.latencies.push(performance.now() - due)
    })
    .catch(() => {
      target.errors++
    })
    .finally(() => {
      if (++done === total) finish()
    })
}

const start = performance.now()
const timer = setInterval(() => {
  const due = Math.min(total, Math.floor((performance.now() - start) / interval) + 1)
  while (sent < due) fire(sent++)
  if (sent === total) clearInterval(timer)
}, 1)

function finish() {
  const round = (x) => (x === null ? null : Math.round(x * 1000) / 1000)
  for (const t of targets) {
    const l = t.latencies.sort((a, b) => a - b)
    const at = (p) => l[Math.min(l.length - 1, Math.floor((p / 100) * l.length))] ?? null
    process.stdout.write(
      `${JSON.stringify({ url: t.url, rate, seconds, count: l.length, errors: t.errors, non2xx: t.non2xx, p50: round(at(50)), p90: round(at(90)), p99: round(at(99)), max: round(l.at(-1) ?? null), samples: l.map((x) => Math.round(x * 100) / 100) })}\n`,
    )
  }
  Promise.all(targets.map((t) => t.pool.close())).then(() => process.exit(0))
}
