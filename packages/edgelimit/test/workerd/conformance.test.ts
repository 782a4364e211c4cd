// The store conformance suite, run inside workerd: each case executes in the test Worker, whose
// limiter calls EdgelimitDurableObject over RPC (clock 'client', so the suite's manual clock
// decides). Once with one object per key, once with keys sharded over 4 objects.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { storeConformance } from '../../src/testing/index.js'
import { type Running, startWorker } from './support/workerd.js'

const names = storeConformance({
  store: () => {
    throw new Error('names only')
  },
}).map((c) => c.name)

let worker: Running
beforeAll(async () => {
  worker = await startWorker(`${import.meta.dirname}/support/worker.ts`, {
    durableObjects: { LIMITER: 'EdgelimitDurableObject' },
  })
})
afterAll(() => worker?.dispose())

it('the Worker runs the same suite', async () => {
  const res = await worker.fetch('/conformance/names')
  expect(await res.json()).toEqual(names)
})

describe.each([
  { layout: 'one object per key', shards: '' },
  { layout: 'sharded over 4 objects', shards: '4' },
])('Durable Object store in workerd, $layout', ({ shards }) => {
  it.each(names.map((name, index) => ({ name, index })))('$name', async ({ index }) => {
    const url = `/conformance/run?case=${index}&shards=${shards}&prefix=conf${shards}&run=r${index}`
    const res = await worker.fetch(url, { method: 'POST' })
    expect(await res.json()).toEqual({ ok: true })
  })
})
