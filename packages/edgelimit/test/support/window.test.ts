import { afterEach, describe, expect, it, vi } from 'vitest'
import { withinWindows } from './examples.js'
import { crossedBoundary, farWindow } from './window.js'

const DAY = 86_400_000
const HOUR = 3_600_000

describe('farWindow', () => {
  it('is a day clear of both ends of its window, for every hour from 1972 to 2332', () => {
    const cramped: number[] = []
    const ms = { '365d': 365 * DAY, '366d': 366 * DAY }
    for (let now = Date.UTC(1972, 0, 1); now < Date.UTC(2332, 0, 1); now += HOUR) {
      const w = ms[farWindow(now)]
      if (now % w < DAY || w - (now % w) < DAY) cramped.push(now)
    }
    expect(cramped).toEqual([])
  })

  it('is 366 days where 365 would end within a day (2026-12-18T00:00:00Z), else 365', () => {
    expect(Date.UTC(2026, 11, 18) % (365 * DAY)).toBe(0)
    expect(farWindow(Date.UTC(2026, 11, 1))).toBe('365d')
    expect(farWindow(Date.UTC(2026, 11, 17, 0, 0, 1))).toBe('366d')
    expect(farWindow(Date.UTC(2026, 11, 18, 23, 59, 59))).toBe('366d')
    expect(farWindow(Date.UTC(2026, 11, 19))).toBe('365d')
  })
})

describe('crossedBoundary', () => {
  it('is true when an end of a window of one of the lengths falls within (from, to]', () => {
    expect(crossedBoundary([60_000], 59_999, 60_000)).toBe(true)
    expect(crossedBoundary([60_000], 60_000, 119_999)).toBe(false)
    expect(crossedBoundary([60_000, HOUR], 3_540_001, 3_599_999)).toBe(false)
    expect(crossedBoundary([60_000, HOUR], 3_540_001, 3_600_000)).toBe(true)
    expect(crossedBoundary([], 0, DAY)).toBe(false)
  })
})

describe('withinWindows', () => {
  afterEach(() => {
    vi.useRealTimers()
  })
  const code = "fixedWindow({ limit: 1, window: '1m' }); tokenBucket({ capacity: 1, refillInterval: '1s' })"

  /** Runs `code` with the system time at `start`; each run takes `ms`. */
  async function runs(start: number, ms: number) {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(start)
    const started: number[] = []
    const result = await withinWindows(code, () => {
      started.push(Date.now())
      vi.setSystemTime(Date.now() + ms)
      return started.length
    })
    return { result, started }
  }

  it('runs once when no end of its fixed or sliding windows falls within the run', async () => {
    // A second's end (the token bucket's interval) does not count: the bucket is not aligned.
    expect(await runs(60_000 * 7 + 100, 59_800)).toEqual({ result: 1, started: [420_100] })
  })

  it('runs again, after the end, when one does; the second run is the result', async () => {
    expect(await runs(60_000 * 7 - 5, 10)).toEqual({ result: 2, started: [419_995, 420_005] })
  })
})
