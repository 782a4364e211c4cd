/** Types of approx-trace.mjs (shared by approx-worker.mjs, the tests and bench/approximate.mjs). */
export interface Trace {
  readonly version?: number
  readonly seed?: number
  readonly durationMs?: number
  readonly burstShare?: number
  readonly burstSize?: number
  readonly burstMs?: number
  /** Per process, ascending start times in ms after the common start. */
  readonly processes: number[][]
}
export function prng(seed: number): () => number
export function evenOffsets(requests: number, durationMs: number): number[]
export function recordTrace(options: {
  processes: number
  requests: number
  durationMs: number
  seed?: number
  burstShare?: number
  burstSize?: number
  burstMs?: number
}): Trace
export function checkTrace(trace: unknown): Trace
export function replay(
  offsets: readonly number[],
  fire: (i: number) => void,
  maxPerTick?: number,
): Promise<number>
export function peakIn(times: readonly number[], ms: number): number
