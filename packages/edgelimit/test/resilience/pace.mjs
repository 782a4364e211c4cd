// Paced load for the resilience workers: starts `fire(i)` at start + i × periodMs without waiting for
// earlier calls (they overlap), catching up after a stalled event loop (at most `maxPerTick` starts
// per timer tick, so a stall does not turn into one big burst), until `stop()` says so.
// Uses one setTimeout at a time, so nothing is left scheduled once it resolves.

/**
 * @param {number} periodMs
 * @param {() => boolean} stop checked before every start
 * @param {(i: number) => void} fire
 * @param {number} [maxPerTick]
 * @returns {Promise<number>} how many were started
 */
export function pace(periodMs, stop, fire, maxPerTick = Number.POSITIVE_INFINITY) {
  return new Promise((resolve) => {
    const start = performance.now()
    let n = 0
    const tick = () => {
      const now = performance.now()
      for (let k = 0; k < maxPerTick && start + n * periodMs <= now; k++) {
        if (stop()) {
          resolve(n)
          return
        }
        fire(n++)
      }
      setTimeout(tick, Math.max(0, start + n * periodMs - performance.now()))
    }
    tick()
  })
}

/**
 * Scheduler stalls of this process (the machine is shared and loaded): a 2 ms ticker records every
 * gap longer than 4 ms (two ticks) with the CPU time the process used in it, so a test can tell time spent
 * deciding from time the process was not running at all. `stop()` clears the ticker.
 */
export function monitorStalls() {
  /** @type {[number, number, number][]} [from, to, CPU ms used in between] */
  const stalls = []
  let last = performance.now()
  let cpu = process.cpuUsage()
  const ticker = setInterval(() => {
    const t = performance.now()
    const used = process.cpuUsage(cpu)
    if (t - last > 4) stalls.push([last, t, (used.user + used.system) / 1000])
    last = t
    cpu = process.cpuUsage()
  }, 2)
  return {
    stalls,
    stop: () => clearInterval(ticker),
    /** How much of [start, end] this process spent off-CPU inside recorded stalls. */
    offCpu: (start, end) => offCpu(stalls, start, end),
  }
}

/** Off-CPU part of the stalls overlapping [start, end] (a stall's CPU time spread evenly over it). */
export function offCpu(stalls, start, end) {
  let sum = 0
  for (const [from, to, used] of stalls) {
    const overlap = Math.min(to, end) - Math.max(from, start)
    if (overlap > 0) sum += overlap * Math.max(0, 1 - used / (to - from))
  }
  return sum
}

/** Milliseconds, monotonic. */
export const now = () => performance.now()

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** ioredis options for fault tests: no offline queue (nothing replayed after a reconnect), no retries. */
export function faultOptions(port) {
  return {
    host: '127.0.0.1',
    port,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 500,
    retryStrategy: () => 50,
  }
}
