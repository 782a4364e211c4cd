// One OS process of an approximate-consistency run, on the BUILT package: used by the resilience
// test (faults.test.ts) and by `npm run bench:approximate` (bench/approximate.mjs). Connects, prints
// "ready", waits for "go" on stdin, then starts limit() calls on one key (they overlap): evenly
// paced, `requests` over `durationMs`, or at the times of this process's part of a recorded trace
// (approx-trace.mjs). Then flushes the limiter, quits and prints one JSON line. It must then exit by
// itself (no process.exit).
// argv: <redis port> <prefix> <key> <consistency strict|approximate> <requests> <durationMs>
//       <denyCache on|off> <syncInterval> [options JSON]
// options: { "trace": <trace file>, "index": <this process's part of it>, "limit": <per window>,
//            "window": <its length>, "coalesce": <the Redis store's option> }
//          (defaults: even pacing, limit 1000, window '365d', coalesce false: one store call per
//          strict decision, as the test's counts assume; with a trace, `requests` and `durationMs`
//          are ignored)

import { readFileSync } from 'node:fs'
import { approximate, createLimiter, fixedWindow } from 'edgelimit'
import { redisStore } from 'edgelimit/redis'
import { Redis } from 'ioredis'
import { checkTrace, evenOffsets, peakIn, replay } from './approx-trace.mjs'
import { faultOptions, now } from './pace.mjs'

const [port, prefix, key, consistency, requests, durationMs, denyCache, syncInterval, json] =
  process.argv.slice(2)
const options = json === undefined ? {} : JSON.parse(json)
const offsets =
  options.trace === undefined
    ? evenOffsets(Number(requests), Number(durationMs))
    : checkTrace(JSON.parse(readFileSync(options.trace, 'utf8'))).processes[options.index ?? 0]
if (offsets === undefined) throw new Error(`the trace has no process ${options.index}`)
const limit = options.limit ?? 1000
const window = options.window ?? '365d'
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(String(reason)))

const client = new Redis(faultOptions(Number(port)))
client.on('error', () => {})
await new Promise((resolve) => client.once('ready', resolve))
// The longest store round trip (reply handled) during the run: while a sync is in flight, the
// process keeps deciding on the counts of the previous one. And the batches: requests admitted
// in-process between two store calls (what one sync charges), the largest of them.
let maxRttMs = 0
let batch = 0
let maxBatch = 0
const timed = (work) => {
  maxBatch = Math.max(maxBatch, batch)
  batch = 0
  const t0 = now()
  return work.finally(() => {
    maxRttMs = Math.max(maxRttMs, now() - t0)
  })
}
const timedClient = {
  evalsha: (...args) => timed(client.evalsha(...args)),
  eval: (...args) => timed(client.eval(...args)),
  del: (...args) => client.del(...args),
}
const storeErrors = []
const limiter = createLimiter({
  rules: [
    {
      name: 'a',
      // A window no run crosses the end of (epoch-aligned, as fixed windows are): with '1h', a run
      // that spanned the top of an hour counted in two windows and admitted up to twice the limit.
      // The test picks one a day clear of both ends (test/support/window.ts): even a 365-day
      // window ends once a year.
      algorithm: fixedWindow({ limit, window }),
      // Only approximate rules sync: a strict rule refuses a syncInterval.
      ...(consistency === 'approximate' ? { consistency: approximate, syncInterval } : { consistency }),
    },
  ],
  store: redisStore({ client: timedClient, prefix, coalesce: options.coalesce ?? false }),
  // The deadline is not what these runs measure: a slow moment on a loaded machine must not turn a
  // store answer into a fail-closed denial.
  timeout: '2s',
  denyCache: denyCache === 'on' ? undefined : false,
  onEvent(event) {
    if (event.type === 'store-error') storeErrors.push(`${event.kind}: ${String(event.error)}`)
    if (event.type === 'decision' && event.source === 'approximate' && event.decision.allowed) batch++
  },
})
await limiter.peek(`${key}:warm`) // connection and script loaded before the start
process.stdout.write('ready\n')
await new Promise((resolve) => process.stdin.once('data', resolve))
process.stdin.destroy()
maxRttMs = 0
maxBatch = 0
batch = 0

let admitted = 0
let failed = 0
const inFlight = []
const startedAt = []
const started = now()
await replay(
  offsets,
  () => {
    startedAt.push(now())
    inFlight.push(
      limiter.limit(key).then(
        (d) => {
          if (d.allowed) admitted++
        },
        () => {
          failed++
        },
      ),
    )
  },
  // Even pacing: after a stall, catch up at no more than 2 per tick rather than in one burst. A
  // recorded trace is replayed as recorded, bursts included.
  options.trace === undefined ? 2 : Number.POSITIVE_INFINITY,
)
const sent = now() - started
await Promise.all(inFlight)
// The most requests started within any one interval: what this process can admit against the counts
// of one sync (more than rate × interval when it catches up after a stall).
await limiter.flush()
await client.quit()
const intervalMs = Number.parseInt(syncInterval, 10)
const peak = peakIn(startedAt, intervalMs)
const peakWithRtt = peakIn(startedAt, intervalMs + maxRttMs)
const total = offsets.length
process.stdout.write(
  `${JSON.stringify({ admitted, failed, requests: total, sentMs: sent, rate: total / (sent / 1000), peak, maxRttMs, peakWithRtt, maxBatch: Math.max(maxBatch, batch), storeErrors, unhandled })}\n`,
)
