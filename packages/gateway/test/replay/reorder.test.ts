import { expect, test } from 'vitest'
import type { LogRecord } from '../../src/replay/record.js'
import { reorder } from '../../src/replay/reorder.js'

const rec = (ts: number, ip = 'a'): LogRecord => ({
  ts,
  ip,
  user: '-',
  method: 'GET',
  path: '/',
  status: 200,
  query: '',
  host: '',
  ua: '-',
  json: undefined,
})

function run(times: number[], horizonMs: number, maxHeld = 1000): string[] {
  const out: string[] = []
  const r = reorder(horizonMs, maxHeld, (x) => out.push(`${x.ts}${x.ip}`))
  for (const [i, t] of times.entries()) r.push(rec(t, String.fromCharCode(97 + i)))
  r.drain()
  return out
}

test('lines within the horizon come out in time order, equal times in file order', () => {
  // The first line is followed by older ones: they are not late.
  expect(run([5000, 1000, 5000, 3000, 1000, 70_000, 9000], 60_000)).toEqual([
    '1000b',
    '1000e',
    '3000d',
    '5000a',
    '5000c',
    '9000g',
    '70000f',
  ])
})

test('a line older than what was released comes out at once (the replay counts it late)', () => {
  expect(run([0, 10_000, 25_000, 1000, 40_000], 5000)).toEqual(['0a', '10000b', '1000d', '25000c', '40000e'])
})

test('a jump past the whole ring releases what is held, in order', () => {
  expect(run([2000, 1000, 1e12, 5000], 3000)).toEqual(['1000b', '2000a', '5000d', '1000000000000c'])
})

test('at most maxHeld records wait', () => {
  const out: number[] = []
  const r = reorder(60_000, 3, (x) => out.push(x.ts))
  for (const t of [4000, 3000, 2000, 1000, 500]) r.push(rec(t))
  // The fourth pushed the oldest out; 500 is older than it, so it follows at once.
  expect(r.held).toBe(3)
  expect(out).toEqual([1000, 500])
  r.drain()
  expect(out).toEqual([1000, 500, 2000, 3000, 4000])
})

test('a horizon of any length holds a bounded ring: 366 days and 100,000 days reorder like 2 minutes', () => {
  // One bucket per second would be 31,622,402 arrays for 366 d (minutes and gigabytes to build)
  // and, for 100,000 d (`--reorder 100000d`), more than an array can hold: a RangeError.
  const times = [5000, 1000, 5000, 3000, 1000, 70_000, 9000]
  const expected = run(times, 120_000)
  for (const days of [366, 100_000]) expect(run(times, days * 86_400_000)).toEqual(expected)
})

test('past a day, lines still wait at least the horizon, and only older ones are late', () => {
  const day = 86_400_000
  // Horizon 3 d: 1 d + 5 s is within it of 4 d (held); 1 s is older than what 4 d released (late).
  expect(run([0, 4 * day, day + 5000, 1000], 3 * day)).toEqual([
    '0a',
    '1000d',
    `${day + 5000}c`,
    `${4 * day}b`,
  ])
})
