/**
 * Helpers of the resilience tests: Redis clients configured for faults, command counting through
 * INFO commandstats, child processes that must exit by themselves, a seeded PRNG.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import { faultOptions, now as nowMs } from './pace.mjs'

export { prng } from './approx-trace.mjs'
export { faultOptions, monitorStalls, now, offCpu, pace, type Stall, sleep } from './pace.mjs'

/**
 * An ioredis client for fault tests: no offline queue (a script queued during an outage is never
 * replayed after the reconnect), no retries, a connect timeout and a 50 ms reconnect.
 */
export function faultClient(port: number): Redis {
  const client = new Redis(faultOptions(port))
  client.on('error', () => {}) // expected during faults; the limiter reports them as events
  return client
}

export function ready(client: Redis): Promise<void> {
  return client.status === 'ready' ? Promise.resolve() : new Promise((r) => client.once('ready', () => r()))
}

/** Calls per command since the last CONFIG RESETSTAT (commands run inside scripts included). */
export async function commandStats(client: Redis): Promise<Record<string, number>> {
  const info = await client.info('commandstats')
  return Object.fromEntries(
    info
      .split('\n')
      .filter((l) => l.startsWith('cmdstat_'))
      .map((l) => [l.slice(8, l.indexOf(':')), Number(/calls=(\d+)/.exec(l)?.[1] ?? 0)]),
  )
}

/** Store calls a client issued: EVALSHA plus EVAL (the first load, or after NOSCRIPT). */
export async function scriptCalls(client: Redis): Promise<number> {
  const stats = await commandStats(client)
  return (stats.evalsha ?? 0) + (stats.eval ?? 0)
}

/**
 * The workers import the BUILT package (`edgelimit`, `edgelimit/redis` from dist/). Waits while it
 * is missing — a concurrent `npm run build` empties dist/ for a few seconds — and fails with a
 * hint when it never appears.
 */
export async function builtPackage(timeoutMs = 60_000): Promise<void> {
  const files = ['index.js', 'redis.js'].map((f) => join(import.meta.dirname, '../../dist', f))
  const deadline = Date.now() + timeoutMs
  while (!files.every((f) => existsSync(f))) {
    if (Date.now() > deadline) throw new Error(`${files.join(', ')} missing: run \`npm run build\` first`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

/**
 * Runs `start` (which starts workers and waits until they have loaded the package). When a worker
 * could not load it because a concurrent `npm run build` had just emptied dist/, waits for the
 * build and starts again, at most 3 times.
 */
export async function withBuiltPackage<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    await builtPackage()
    try {
      return await start()
    } catch (error) {
      if (attempt >= 3 || !/ERR_MODULE_NOT_FOUND/.test(String(error))) throw error
      console.log(`[resilience] dist/ was being rebuilt when a worker started (attempt ${attempt}): again`)
    }
  }
}

/** A worker process started from this folder with the repo's node. */
export interface Worker {
  readonly child: ChildProcessWithoutNullStreams
  /** Every stdout line so far. */
  readonly lines: string[]
  /** The next stdout line (rejects when the process exits first). */
  next(): Promise<string>
  /** Resolves with the exit code/signal and when (performance.now()) it happened. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>
  stderr(): string
}

export function startWorker(script: string, args: string[]): Worker {
  const child = spawn(process.execPath, [join(import.meta.dirname, script), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const lines: string[] = []
  const waiting: { resolve: (l: string) => void; reject: (e: Error) => void }[] = []
  let read = 0
  let closed = false
  const reader = createInterface({ input: child.stdout })
  reader.on('line', (line) => {
    lines.push(line)
    const w = waiting.shift()
    if (w !== undefined) {
      read++
      w.resolve(line)
    }
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>(
    (resolve) => {
      child.on('exit', (code, signal) => resolve({ code, signal, at: performance.now() }))
    },
  )
  // Rejections carry the whole stderr: wait until every stdio stream of the child has closed.
  const allClosed = new Promise<void>((resolve) => child.on('close', () => resolve()))
  const gone = () => allClosed.then(() => Promise.reject(new Error(`worker ${script} exited: ${stderr}`)))
  reader.on('close', () => {
    closed = true
    for (const w of waiting.splice(0)) gone().catch(w.reject)
  })
  return {
    child,
    lines,
    exited,
    stderr: () => stderr,
    next() {
      if (read < lines.length) return Promise.resolve(lines[read++] as string)
      if (closed) return gone()
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }))
    },
  }
}

/** Waits for a worker's exit, or SIGKILLs it after `ms` and reports that it hung. */
export async function exitWithin(
  worker: Worker,
  ms: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number; hung: boolean }> {
  let timer: NodeJS.Timeout | undefined
  const hung = await Promise.race([
    worker.exited.then(() => false),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), ms)
    }),
  ])
  clearTimeout(timer)
  if (hung) worker.child.kill('SIGKILL')
  return { ...(await worker.exited), hung }
}

/** Summary statistics of latencies, for the report. */
export function stats(values: readonly number[]) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1] ?? 0 }
}

/** One decision of a load loop: when it started, how long it took, and how it ended. */
export interface TrackedCall<D> {
  started: number
  ms: number
  decision?: D
  error?: unknown
}

/**
 * Records how `pending` ends into `call` (latency from `call.started`, the decision or the error)
 * and keeps it in `inFlight` until then, so a test can await every call it started.
 */
export function track<D>(
  call: TrackedCall<D>,
  pending: Promise<D>,
  inFlight: Set<Promise<unknown>>,
  onDecision?: (decision: D) => void,
): void {
  const p = pending.then(
    (d) => {
      call.ms = nowMs() - call.started
      call.decision = d
      onDecision?.(d)
    },
    (error: unknown) => {
      call.error = error
    },
  )
  inFlight.add(p)
  void p.finally(() => inFlight.delete(p))
}
