import { createServer } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { describe, expect, test, vi } from 'vitest'
import { createDashboard } from '../../src/server/dashboard.js'
import { createDashboardData } from '../../src/server/dashboard-data.js'
import { openStream } from './sse.js'

describe('a dashboard client that reads nothing', () => {
  test('is dropped once its socket has stayed full for stalledMs, and its slot serves the next client', async () => {
    const data = createDashboardData({ now: () => 1_000_000 })
    // Updates of about 1 MB (many rules, long names) fill the kernel's buffers in a few ticks.
    const rules = Array.from({ length: 4000 }, (_, i) => ({
      name: `rule-${String(i).padStart(4, '0')}-${'x'.repeat(100)}`,
      mode: 'enforce' as const,
      enforce: 100,
    }))
    const dashboard = createDashboard({
      data,
      intervalMs: 20,
      stalledMs: 400,
      maxClients: 1,
      context: () => ({ rules, store: { type: 'memory', status: 'ready' }, generation: 1, draining: false }),
    })
    const server = createServer((req, res) => {
      if (!dashboard.handle(req, res, (req.url ?? '/').split('?')[0] as string)) res.writeHead(404).end()
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address() as AddressInfo
    const url = `http://127.0.0.1:${port}/dashboard/events`
    // Sends its request, then never reads: no 'data' listener, paused from the start.
    const stalled = connect({ port, host: '127.0.0.1' })
    stalled.pause()
    stalled.on('error', () => {})
    const gone = new Promise<void>((r) => stalled.once('close', () => r()))
    try {
      stalled.write(`GET /dashboard/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
      await vi.waitFor(() => expect(dashboard.clients).toBe(1), { timeout: 5000, interval: 10 })
      // It holds the only slot: the next client is refused meanwhile.
      const refused = await openStream(url)
      expect(refused.status).toBe(503)
      // Dropped: the slot is free and the connection closed by the gateway.
      await vi.waitFor(() => expect(dashboard.clients).toBe(0), { timeout: 20_000, interval: 20 })
      // Read now, the stream ends: the gateway closed it (not only forgot it).
      stalled.resume()
      await gone
      const next = await openStream(url)
      expect(next.status).toBe(200)
      await next.next((e) => e.event === 'snapshot', 20_000)
      next.close()
    } finally {
      stalled.destroy()
      dashboard.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    }
  }, 60_000)
})
