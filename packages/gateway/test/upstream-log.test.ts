import { createServer } from 'node:net'
import { manualClock } from 'edgelimit/testing'
import { describe, expect, test } from 'vitest'
import { startInProcess } from './support/gateway.js'

/** A port on 127.0.0.1 that nothing listens on: connecting to it is refused. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

describe('upstream failures are logged', () => {
  test('each 502 gets a warning with its status, reason, method and path; a burst is cut to 10 a second and the rest summed up', async () => {
    const clock = manualClock(1_750_000_000_000)
    const gw = await startInProcess('rules: []\n', {
      upstream: `http://127.0.0.1:${await closedPort()}`,
      clock,
    })
    try {
      const first = await fetch(`${gw.url}/orders?id=1`, { method: 'POST', body: 'x' })
      expect(first.status).toBe(502)
      await first.arrayBuffer()
      const failed = () => gw.logs.filter((l) => l.msg === 'upstream failed')
      expect(failed()).toEqual([
        expect.objectContaining({
          level: 40,
          status: 502,
          reason: 'ECONNREFUSED',
          method: 'POST',
          path: '/orders?id=1',
        }),
      ])
      // 49 more in the same second (the clock stands still): 9 more lines, 40 only counted.
      for (let i = 0; i < 49; i++) {
        const response = await fetch(`${gw.url}/burst`)
        expect(response.status).toBe(502)
        await response.arrayBuffer()
      }
      expect(failed()).toHaveLength(10)
      // The next second: its first failure is logged, and the 40 of the last are summed up, in
      // one line (or in several, should the timer that ends the second run mid-burst: 40 in all).
      clock.advance(1_000)
      const next = await fetch(`${gw.url}/after`)
      expect(next.status).toBe(502)
      await next.arrayBuffer()
      expect(failed()).toHaveLength(11)
      expect(failed()[10]).toMatchObject({ path: '/after', reason: 'ECONNREFUSED' })
      const summaries = gw.logs.filter((l) => l.msg.startsWith('upstream failures not logged'))
      expect(summaries.length).toBeGreaterThan(0)
      expect(summaries.every((l) => l.reason === 'ECONNREFUSED' && l.level === 40)).toBe(true)
      expect(summaries.reduce((sum, l) => sum + (l.suppressed as number), 0)).toBe(40)
    } finally {
      await gw.close()
    }
  })

  test('the failures not logged in the last second are summed up when the gateway stops, before "stopped"', async () => {
    const clock = manualClock(1_750_000_000_000)
    const gw = await startInProcess('rules: []\n', {
      upstream: `http://127.0.0.1:${await closedPort()}`,
      clock,
    })
    // 15 in one second (the clock stands still): 10 lines, 5 only counted, and the second has not ended.
    for (let i = 0; i < 15; i++) {
      const response = await fetch(`${gw.url}/down`)
      expect(response.status).toBe(502)
      await response.arrayBuffer()
    }
    await gw.close()
    const messages = gw.logs.map((l) => l.msg)
    expect(messages.filter((m) => m === 'upstream failed')).toHaveLength(10)
    const summary = gw.logs.filter((l) => l.msg.startsWith('upstream failures not logged'))
    expect(summary).toEqual([
      expect.objectContaining({
        level: 40,
        reason: 'ECONNREFUSED',
        suppressed: 5,
        since: new Date(clock.now()).toISOString(),
      }),
    ])
    expect(messages.indexOf(summary[0]?.msg as string)).toBeLessThan(messages.indexOf('stopped'))
  })
})
