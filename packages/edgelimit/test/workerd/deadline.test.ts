// The decision deadline in workerd, where a timer belongs to the request that set it and is
// cancelled when that request ends: a limiter shared by overlapping requests still answers each
// slow call by its deadline. Run without and with Node's timers as globals (ref/unref handles).
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Running, startWorker } from './support/workerd.js'

const entry = join(import.meta.dirname, 'support', 'worker.ts')

describe.each([
  { timers: 'Workers timers', compatibilityFlags: [] },
  { timers: 'Node timers', compatibilityFlags: ['nodejs_compat', 'enable_nodejs_global_timers'] },
])('the decision deadline in workerd ($timers)', ({ compatibilityFlags }) => {
  let worker: Running
  beforeAll(async () => {
    worker = await startWorker(entry, {
      durableObjects: { SLOW: 'SlowObject' },
      compatibilityFlags,
    } as Parameters<typeof startWorker>[1])
  })
  afterAll(() => worker?.dispose())

  async function limit(key: string) {
    const started = Date.now()
    const res = await worker.fetch(`/deadline?key=${key}`)
    const body = (await res.json()) as { allowed: boolean; reason: string | null }
    return { ...body, ms: Date.now() - started }
  }

  it("holds for a slow call that overlaps another request's call", async () => {
    // The limiter (timeout 1 s) and the object exist before the two requests start. Margins are
    // wide for a loaded machine: A is well inside the deadline, B's wait far beyond it.
    expect((await limit('warm')).allowed).toBe(true)
    const run = `${Date.now()}`
    // A's call answers in 300 ms and its request ends; B's, started meanwhile, would take 8 s.
    const a = limit(`sleep300-a${run}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const b = limit(`sleep8000-b${run}`)
    expect(await a).toMatchObject({ allowed: true })
    const slow = await b
    expect(slow).toMatchObject({ allowed: false, reason: 'store-unavailable' })
    expect(slow.ms).toBeLessThan(4000)
  })

  it('limiter.reset(key) rejects with ERR_EDGELIMIT_TIMEOUT at the deadline, not never', async () => {
    // Audit defect 3: the object's reset was awaited with no deadline, and a hung object held the
    // reset (an admin endpoint, a Worker request) until the runtime gave up.
    const started = Date.now()
    const res = await worker.fetch(`/deadline?reset&key=sleep8000-r${Date.now()}`)
    const body = await res.json()
    expect(body).toMatchObject({ reset: false, code: 'ERR_EDGELIMIT_TIMEOUT' })
    expect(Date.now() - started).toBeLessThan(4000)
    // A reset that answers in time succeeds.
    expect(await (await worker.fetch(`/deadline?reset&key=sleep50-r${Date.now()}`)).json()).toEqual({
      reset: true,
    })
  })

  it('holds for a slow call alone, after other requests ended', async () => {
    const slow = await limit(`sleep8000-c${Date.now()}`)
    expect(slow).toMatchObject({ allowed: false, reason: 'store-unavailable' })
    expect(slow.ms).toBeLessThan(4000)
  })
})
