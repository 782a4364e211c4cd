// Identical decisions: a recorded trace (fixtures/trace.json: 3,000 requests over 9 limiters,
// every algorithm, several rules, a shadow rule, peeks and over-limit costs) replayed at the same
// injected times through the memory store in Node and through the Durable Object store inside
// workerd gives the same decision, field by field and rule by rule.
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { memoryStore } from '../../src/index.js'
import { type Decisions, replay, type Trace } from './support/trace.js'
import { type Running, startWorker } from './support/workerd.js'

const trace = JSON.parse(readFileSync(`${import.meta.dirname}/fixtures/trace.json`, 'utf8')) as Trace

let worker: Running
let memory: Decisions
beforeAll(async () => {
  worker = await startWorker(`${import.meta.dirname}/support/worker.ts`, {
    durableObjects: { LIMITER: 'EdgelimitDurableObject' },
  })
  memory = await replay(trace, () => memoryStore())
})
afterAll(() => worker?.dispose())

it('the trace exercises admissions, denials, delays and never-passing costs in every limiter', () => {
  for (const [name, decisions] of Object.entries(memory)) {
    expect(
      decisions.some((d) => d.allowed),
      name,
    ).toBe(true)
    expect(
      decisions.some((d) => !d.allowed && d.reason === 'limit-exceeded'),
      name,
    ).toBe(true)
    expect(
      decisions.some((d) => d.reason === 'cost-exceeds-limit'),
      name,
    ).toBe(true)
  }
  expect(memory['leaky-shape']?.some((d) => (d.delayMs ?? 0) > 0)).toBe(true)
  // The shadow rule denies without blocking.
  expect(memory.shadow?.some((d) => d.allowed && d.rules[1]?.[1] === false)).toBe(true)
})

describe.each([
  { layout: 'one object per key', shards: '' },
  { layout: 'sharded over 3 objects', shards: '3' },
])('Durable Object store in workerd ($layout) ≡ memory store', ({ shards }) => {
  let durable: Decisions
  beforeAll(async () => {
    const res = await worker.fetch(`/trace?shards=${shards}&prefix=eq${shards}`, {
      method: 'POST',
      body: JSON.stringify(trace),
    })
    durable = (await res.json()) as Decisions
  })

  it.each(Object.keys(trace.limiters))('%s', (name) => {
    expect(durable[name]?.length).toBe(memory[name]?.length)
    expect(durable[name]).toEqual(memory[name])
  })
})
