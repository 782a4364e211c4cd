/** Types of pace.mjs (shared by the workers and the tests). */
export function pace(
  periodMs: number,
  stop: () => boolean,
  fire: (i: number) => void,
  maxPerTick?: number,
): Promise<number>
export const now: () => number
export function sleep(ms: number): Promise<void>
export function faultOptions(port: number): {
  host: string
  port: number
  enableOfflineQueue: false
  maxRetriesPerRequest: number
  connectTimeout: number
  retryStrategy: () => number
}
export type Stall = [from: number, to: number, cpuMs: number]
export function monitorStalls(): { stalls: Stall[]; stop(): void; offCpu(start: number, end: number): number }
export function offCpu(stalls: readonly Stall[], start: number, end: number): number
