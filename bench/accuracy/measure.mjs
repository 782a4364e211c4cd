// Runs sources through edgelimit's sliding-window counter and its exact sliding log, two ways.
//
// Cloudflare's method ("open loop"): every request is counted, admitted or not, and at each
// request the counter's estimate of the rate is compared with the exact rate over the same
// requests; a request is wrongly allowed when the estimate is within the threshold but the exact
// rate is over it, wrongly blocked the other way round. Both are read from edgelimit itself: a
// rule with a limit no source reaches admits everything, and its `remaining` gives the count.
//
// edgelimit's own semantics ("closed loop"): each algorithm enforces the limit on its own state
// (a denied request consumes nothing); their decisions on the same requests are compared, and the
// counter's most admitted in any window span is measured against the limit.

import { createLimiter, memoryStore, slidingLog, slidingWindow } from 'edgelimit'
import { CLASSES, source } from './traffic.mjs'

const HUGE = 1_000_000_000

function bound(spec) {
  const policy = createLimiter({ rules: [{ name: 'r', algorithm: spec }] }).rules[0].policy
  return memoryStore({ maxKeys: 10_000 }).bind([{ name: 'r', policy }])
}

function tally() {
  return {
    sources: 0,
    requests: 0,
    wrongAllowed: 0,
    wrongBlocked: 0,
    relErrorSum: 0,
    absErrorSum: 0,
    overSources: 0,
    falseNegativeSources: 0,
    falsePositiveSources: 0,
    worstMissedOverPct: 0,
  }
}

/** Measures sources until `requests` have been made; `progress(done)` now and then. */
export function measure({ requests, limit, windowMs, rand, progress }) {
  const openCounter = bound(slidingWindow({ limit: HUGE, window: windowMs }))
  const openLog = bound(slidingLog({ limit: HUGE, window: windowMs }))
  const closedCounter = bound(slidingWindow({ limit, window: windowMs }))
  const closedLog = bound(slidingLog({ limit, window: windowMs }))
  const open = Object.fromEntries(['all', ...CLASSES].map((c) => [c, tally()]))
  const closed = {
    requests: 0,
    misses: 0,
    falseBlocks: 0,
    counterAdmitted: 0,
    logAdmitted: 0,
    maxInSpan: 0,
    overLimitSources: 0,
    overshoot: {},
  }
  // The counter's most admitted in any span, over the limit, for every source that pushed past it.
  const overshoots = []
  let made = 0
  let clock = 0
  let id = 0
  while (made < requests) {
    const key = `s${id++}`
    // Sources run one after another on one clock (keys are independent), each at a random phase.
    const start = clock + Math.floor(rand() * windowMs)
    let exceeded = false
    let approxBlocked = false
    let worstOver = 0
    const s = tally()
    const span = []
    let head = 0
    let sourceMax = 0
    const { kind, duration } = source(rand, limit, windowMs, (t) => {
      const now = start + t
      const estimate = HUGE - openCounter.evaluateSync(key, 1, now)[0].remaining - 1
      const exact = HUGE - openLog.evaluateSync(key, 1, now)[0].remaining - 1
      const approxAllows = estimate + 1 <= limit
      const exactAllows = exact + 1 <= limit
      s.requests++
      if (approxAllows && !exactAllows) s.wrongAllowed++
      if (!approxAllows && exactAllows) s.wrongBlocked++
      // The rate each side sees at this request, this request included.
      s.absErrorSum += Math.abs(estimate - exact)
      s.relErrorSum += Math.abs(estimate - exact) / (exact + 1)
      if (!exactAllows) {
        exceeded = true
        worstOver = Math.max(worstOver, (exact + 1) / limit - 1)
      }
      if (!approxAllows) approxBlocked = true
      const a = closedCounter.evaluateSync(key, 1, now)[0].allowed
      const b = closedLog.evaluateSync(key, 1, now)[0].allowed
      closed.requests++
      if (a && !b) closed.misses++
      if (!a && b) closed.falseBlocks++
      if (b) closed.logAdmitted++
      if (a) {
        closed.counterAdmitted++
        while (head < span.length && now - span[head] >= windowMs) head++
        span.push(now)
        sourceMax = Math.max(sourceMax, span.length - head)
      }
    })
    clock = start + duration + 2 * windowMs
    closed.maxInSpan = Math.max(closed.maxInSpan, sourceMax)
    if (sourceMax > limit) closed.overLimitSources++
    if (exceeded) overshoots.push(sourceMax / limit - 1)
    for (const t of [open.all, open[kind]]) {
      t.sources++
      for (const f of ['requests', 'wrongAllowed', 'wrongBlocked', 'relErrorSum', 'absErrorSum']) t[f] += s[f]
      if (exceeded) t.overSources++
      if (exceeded && !approxBlocked) {
        t.falseNegativeSources++
        t.worstMissedOverPct = Math.max(t.worstMissedOverPct, worstOver * 100)
      }
      if (approxBlocked && !exceeded) t.falsePositiveSources++
    }
    made += s.requests
    progress?.(made)
  }
  overshoots.sort((a, b) => a - b)
  const at = (q) =>
    overshoots.length === 0
      ? 0
      : 100 * overshoots[Math.min(overshoots.length - 1, Math.floor(q * overshoots.length))]
  closed.overshoot = { sources: overshoots.length, medianPct: at(0.5), p99Pct: at(0.99), maxPct: at(1) }
  return { open, closed }
}
