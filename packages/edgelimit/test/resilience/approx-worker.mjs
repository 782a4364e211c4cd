// One OS process of the approximate-consistency test, on the BUILT package. Connects, prints
// "ready", waits for "go" on stdin, then sends `requests` limit() calls on one key, paced evenly
// over `durationMs` (calls overlap), flushes the limiter, quits and prints one JSON line.
// It must then exit by itself (no process.exit).
// argv: <redis port> <prefix> <key> <consistency strict|approximate> <requests> <durationMs>
//       <denyCache on|off> <syncInterval>

import { createLimiter, fixedWindow } from 'edgelimit'
import { redisStore } from 'edgelimit/redis'
import { Redis } from 'ioredis'
import { faultOptions, now, pace } from './pace.mjs'

const [port, prefix, key, consistency, requests, durationMs, denyCache, syncInterval] = process.argv.slice(2)
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(String(reason)))

const client = new Redis(faultOptions(Number(port)))
client.on('error', () => {})
await new Promise((resolve) => client.once('ready', resolve))
// The longest store round trip (reply handled) during the run: while a sync is in flight, the
// process keeps deciding on the counts of the previous one.
let maxRttMs = 0
const timed = (work) => {
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
  rules: [{ name: 'a', algorithm: fixedWindow({ limit: 1000, window: '1h' }), consistency, syncInterval }],
  store: redisStore({ client: timedClient, prefix }),
  // The deadline is not what this test measures: a slow moment on a loaded machine must not turn a
  // store answer into a fail-closed denial.
  timeout: '2s',
  denyCache: denyCache === 'on' ? undefined : false,
  onEvent(event) {
    if (event.type === 'store-error') storeErrors.push(`${event.kind}: ${String(event.error)}`)
  },
})
await limiter.peek(`${key}:warm`) // connection and script loaded before the start
process.stdout.write('ready\n')
await new Promise((resolve) => process.stdin.once('data', resolve))
process.stdin.destroy()
maxRttMs = 0

let admitted = 0
let failed = 0
const inFlight = []
const startedAt = []
const total = Number(requests)
const started = now()
await pace(
  Number(durationMs) / total,
  () => inFlight.length >= total,
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
  // After a stall, catch up at no more than 2 per tick rather than in one burst.
  2,
)
const sent = now() - started
await Promise.all(inFlight)
// The most requests started within any one window of `ms`: what this process can admit against
// the counts of one sync (more than rate × interval when it catches up after a stall).
const peakIn = (ms) => {
  let peak = 0
  for (let lo = 0, hi = 0; hi < startedAt.length; hi++) {
    while (startedAt[hi] - startedAt[lo] >= ms) lo++
    peak = Math.max(peak, hi - lo + 1)
  }
  return peak
}
const intervalMs = Number.parseInt(syncInterval, 10)
await limiter.flush()
await client.quit()
process.stdout.write(
  `${JSON.stringify({ admitted, failed, requests: total, sentMs: sent, rate: total / (sent / 1000), peak: peakIn(intervalMs), maxRttMs, peakWithRtt: peakIn(intervalMs + maxRttMs), storeErrors, unhandled })}\n`,
)
