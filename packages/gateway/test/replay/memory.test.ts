import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { expect, test } from 'vitest'
import { policyFromRules, replayLog } from '../../src/replay/index.js'
import { accessLog } from './generate-log.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

test('replaying a generated 1,000,000-line log keeps memory flat', async () => {
  const rules = policyFromRules([
    { name: 'per-ip', algorithm: 'sliding-window', limit: 100, window: '1m' },
    { name: 'burst', algorithm: 'token-bucket', capacity: 20, refillRate: 5 },
    {
      name: 'login',
      match: { path: '/login', methods: ['POST'] },
      algorithm: 'fixed-window',
      limit: 5,
      window: '1m',
    },
  ])
  const heap: [number, number][] = []
  // 50,000 clients over ~42 minutes, written up to 20 s out of order, one malformed line in 10,000.
  const r = await replayLog({
    inputs: [accessLog({ lines: 1_000_000, clients: 50_000, malformedEvery: 10_000 })],
    rules,
    onProgress: ({ lines }) => {
      if (lines % (4 * 65_536) !== 0) return
      gc()
      heap.push([lines, process.memoryUsage().heapUsed])
    },
  })
  expect(r.lines).toBe(1_000_000)
  expect(r.malformed.count).toBe(100)
  expect(r.requests).toBe(999_900)
  expect(r.late.count).toBe(0)
  expect(r.rules[0]?.denied).toBeGreaterThan(0)
  expect(heap.length).toBe(3)
  const [first, , last] = heap as [[number, number], [number, number], [number, number]]
  // Once every client has been seen, memory stays put: state per client is bounded, not per line.
  const growth = last[1] - first[1]
  console.log(
    `heap after ${first[0]} lines ${(first[1] / 2 ** 20).toFixed(1)} MiB, after ${last[0]} lines ${(last[1] / 2 ** 20).toFixed(1)} MiB (growth ${(growth / 2 ** 20).toFixed(1)} MiB)`,
  )
  expect(growth).toBeLessThan(16 * 2 ** 20)
  expect(last[1]).toBeLessThan(256 * 2 ** 20)
})
