// Arrival traces for the approximate-consistency runs, shared by approx-worker.mjs (one OS process
// of a run), the resilience test (faults.test.ts, even pacing) and `npm run bench:approximate`
// (bench/approximate.mjs, a recorded bursty trace). A trace lists, per process, when each request
// starts: milliseconds after the common start, ascending. Plain JSON, so a trace recorded once is
// replayed identically by every run that reads it:
//   { "version": 1, "seed": 1, "durationMs": 2000, "processes": [[0.42, 1.3, …], …] }

/**
 * A seeded PRNG (mulberry32): the same seed gives the same trace. The one definition for the tests
 * (support.ts re-exports it) and the benchmarks (bench/accuracy/traffic.mjs).
 */
export function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** `requests` starts evenly spaced over `durationMs` (the resilience test's load). */
export function evenOffsets(requests, durationMs) {
  return Array.from({ length: requests }, (_, i) => (i * durationMs) / requests)
}

/**
 * Records a bursty multi-process trace: per process, `requests` starts within `durationMs`, most of
 * them Poisson arrivals at the process's mean rate, the rest (`burstShare`) in bursts of
 * `burstSize` requests packed into `burstMs`, at random times. Times are rounded to 0.01 ms.
 */
export function recordTrace({
  processes,
  requests,
  durationMs,
  seed = 1,
  burstShare = 0.2,
  burstSize = 20,
  burstMs = 5,
}) {
  const random = prng(seed)
  const trace = { version: 1, seed, durationMs, burstShare, burstSize, burstMs, processes: [] }
  for (let p = 0; p < processes; p++) {
    const bursts = Math.floor((requests * burstShare) / burstSize)
    const times = []
    // Poisson arrivals conditioned on their count: sorted uniform times.
    for (let i = 0; i < requests - bursts * burstSize; i++) times.push(random() * durationMs)
    for (let b = 0; b < bursts; b++) {
      const at = random() * (durationMs - burstMs)
      for (let i = 0; i < burstSize; i++) times.push(at + random() * burstMs)
    }
    times.sort((x, y) => x - y)
    trace.processes.push(times.map((t) => Math.round(t * 100) / 100))
  }
  return trace
}

/** Checks a trace read from a file; returns it, or throws saying what is wrong. */
export function checkTrace(trace) {
  const ok =
    trace !== null &&
    typeof trace === 'object' &&
    Array.isArray(trace.processes) &&
    trace.processes.length > 0 &&
    trace.processes.every(
      (times) =>
        Array.isArray(times) &&
        times.length > 0 &&
        times.every((t, i) => Number.isFinite(t) && t >= 0 && (i === 0 || t >= times[i - 1])),
    )
  if (!ok) throw new Error('a trace is { "processes": [[ms, …], …] } with ascending, non-negative times')
  return trace
}

/**
 * Starts `fire(i)` at start + offsets[i] without waiting for earlier calls (they overlap). After a
 * stalled event loop it catches up at no more than `maxPerTick` starts per timer tick. Uses one
 * setTimeout at a time, so nothing is left scheduled once it resolves (with how many started).
 */
export function replay(offsets, fire, maxPerTick = Number.POSITIVE_INFINITY) {
  return new Promise((resolve) => {
    const start = performance.now()
    let n = 0
    const tick = () => {
      const now = performance.now()
      for (let k = 0; k < maxPerTick && n < offsets.length && start + offsets[n] <= now; k++) fire(n++)
      if (n >= offsets.length) {
        resolve(n)
        return
      }
      setTimeout(tick, Math.max(0, start + offsets[n] - performance.now()))
    }
    tick()
  })
}

/** The most of the ascending `times` within any span shorter than `ms`. */
export function peakIn(times, ms) {
  let peak = 0
  for (let lo = 0, hi = 0; hi < times.length; hi++) {
    while (times[hi] - times[lo] >= ms) lo++
    peak = Math.max(peak, hi - lo + 1)
  }
  return peak
}
