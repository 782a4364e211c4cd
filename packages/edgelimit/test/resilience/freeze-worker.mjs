// One OS process of the store-freeze test, on the BUILT package. Sends one limit() call every
// `periodMs` (calls overlap), SIGSTOPs the Redis server for `freezeMs` once the store is deciding
// steadily, SIGCONTs it and keeps going until decisions come from the store again. Prints one JSON line with every call's timing and
// outcome, then quits its client and must exit by itself: no process.exit, so a leaked timer or
// socket keeps it alive and the test sees it.
// argv: <redis port> <redis pid> <onStoreError open|closed|local> <prefix> <periodMs> <freezeMs> <openMs>
//       <window> (the rule's window: one the run cannot cross the end of, test/support/window.ts)

import { createLimiter, fixedWindow } from 'edgelimit'
import { redisStore } from 'edgelimit/redis'
import { Redis } from 'ioredis'
import { faultOptions, monitorStalls, now, pace, sleep } from './pace.mjs'

const [port, pid, mode, prefix, periodMs, freezeMs, openMs, window] = process.argv.slice(2)
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(String(reason)))
// Written synchronously (stdout is a pipe): reports rejections that happen even after the result.
process.on('exit', () => process.stdout.write(`${JSON.stringify({ exit: true, unhandled })}\n`))

const client = new Redis(faultOptions(Number(port)))
client.on('error', () => {}) // connection errors are expected; decisions report them as events
await new Promise((resolve) => client.once('ready', resolve))

const sources = new WeakMap()
const breaker = []
const storeErrors = { timeout: 0, error: 0, 'breaker-open': 0 }
const limiter = createLimiter({
  // 5 per window: during the freeze, `local` must admit exactly 5 of the calls on the frozen key
  // (counted in-process, on the system clock: a window whose end the freeze spanned would admit 10).
  rules: [{ name: 'r', algorithm: fixedWindow({ limit: 5, window }), onStoreError: mode }],
  store: redisStore({ client, prefix }),
  breaker: { openMs: Number(openMs) },
  onEvent(event) {
    if (event.type === 'decision') sources.set(event.decision, event.source)
    else if (event.type === 'breaker') breaker.push({ at: now(), state: event.state })
    else if (event.type === 'store-error') storeErrors[event.kind]++
  },
})
await limiter.limit(`${prefix}:warm`) // loads the script

const calls = []
// The calls in the order they were decided: the freeze waits for a run of them from the store.
const decided = []
const inFlight = new Set()
let phase = 'before'
let stoppedAt = 0
let resumedAt = 0
let recoveredAt = 0

function fire(i) {
  const started = now()
  const at = phase
  // Fresh keys outside the freeze (always admitted by the store); one key during it.
  const key = at === 'frozen' ? 'frozen' : `${at}:${i}`
  const call = { i, phase: at, key, started, ms: 0 }
  calls.push(call)
  const p = limiter.limit(key).then(
    (d) => {
      call.ms = now() - started
      call.allowed = d.allowed
      call.reason = d.reason ?? null
      call.source = sources.get(d) ?? null
      decided.push(call)
      if (at === 'after' && call.source === 'store' && recoveredAt === 0) recoveredAt = now()
    },
    (error) => {
      call.ms = now() - started
      call.rejected = String(error)
    },
  )
  inFlight.add(p)
  p.finally(() => inFlight.delete(p))
}

// Time this process was descheduled by the loaded machine, to tell it from the limiter's latency.
const monitor = monitorStalls()

const loop = pace(Number(periodMs), () => phase === 'done', fire)
await sleep(300)
// The freeze starts from a store that decides: on a loaded machine a stall of Redis (or of this
// process) longer than the deadline can time out calls and open the breaker before it. Then it
// waits (up to 5 s) until the last STEADY decisions all came from the store.
const STEADY = 20
const steady = () =>
  decided.length >= STEADY &&
  decided.slice(-STEADY).every((c) => c.source === 'store') &&
  breaker.at(-1)?.state !== 'open'
const waitUntil = now() + 5000
while (!steady() && now() < waitUntil) await sleep(5)
process.kill(Number(pid), 'SIGSTOP')
stoppedAt = now()
phase = 'frozen'
await sleep(Number(freezeMs))
process.kill(Number(pid), 'SIGCONT')
resumedAt = now()
phase = 'after'
const giveUp = resumedAt + 3000
while (now() < giveUp && (recoveredAt === 0 || now() < recoveredAt + 300)) await sleep(10)
phase = 'done'
const started = await loop
await Promise.all(inFlight)
monitor.stop()
const ended = new Promise((resolve) => client.once('end', resolve))
await client.quit()
await ended
await new Promise((resolve) => setImmediate(resolve))
// A timer that fired during that turn (the deadline's kept, unref'd timer, on a loaded machine
// late) defers its sweep by one I/O turn: an Immediate that is gone a turn later. One queued again
// and again is still seen after 10 turns.
for (let i = 0; i < 10 && process.getActiveResourcesInfo().includes('Immediate'); i++) {
  await new Promise((resolve) => setImmediate(resolve))
}
// What still keeps the event loop alive once the client is gone: must be no timer.
const resources = process.getActiveResourcesInfo()
process.stdout.write(
  `${JSON.stringify({
    started,
    stoppedAt,
    resumedAt,
    recoveredAt,
    breaker,
    storeErrors,
    stalls: monitor.stalls,
    calls,
    resources,
    unhandled,
  })}\n`,
)
