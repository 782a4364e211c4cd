/** A Server-Sent Events client over node:http for tests: every event kept, waits by predicate. */
import { type IncomingHttpHeaders, type IncomingMessage, request } from 'node:http'
import type { DashboardMessage } from '../../src/server/dashboard.js'
import type { DashboardPoint } from '../../src/server/dashboard-data.js'

export interface SseEvent {
  readonly event: string
  readonly data: string
}

export interface SseStream {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly events: SseEvent[]
  /** The last `retry:` field received. */
  readonly retry: number | undefined
  /** Resolves the first event (received or to come) that satisfies `test`. */
  next(test: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>
  /** Leaves (destroys the connection). */
  close(): void
}

export function openStream(url: string): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { headers: { accept: 'text/event-stream' }, agent: false },
      (res: IncomingMessage) => {
        const events: SseEvent[] = []
        const waiters = new Set<{ test: (e: SseEvent) => boolean; done: (e: SseEvent) => void }>()
        let retry: number | undefined
        let buffer = ''
        let event = 'message'
        let data: string[] = []
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          buffer += chunk
          let nl = buffer.indexOf('\n')
          while (nl !== -1) {
            const line = buffer.slice(0, nl).replace(/\r$/, '')
            buffer = buffer.slice(nl + 1)
            nl = buffer.indexOf('\n')
            if (line === '') {
              if (data.length > 0) {
                const e = { event, data: data.join('\n') }
                events.push(e)
                for (const w of waiters) if (w.test(e)) w.done(e)
              }
              event = 'message'
              data = []
            } else if (line.startsWith('event:')) event = line.slice(6).trim()
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
            else if (line.startsWith('retry:')) retry = Number(line.slice(6).trim())
          }
        })
        const ended = new Promise<void>((r) => {
          res.once('end', () => r())
          res.once('close', () => r())
        })
        res.on('error', () => {})
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          events,
          get retry() {
            return retry
          },
          ended,
          next(test, timeoutMs = 15_000) {
            const hit = events.find(test)
            if (hit !== undefined) return Promise.resolve(hit)
            return new Promise((done, fail) => {
              const waiter = {
                test,
                done: (e: SseEvent) => {
                  clearTimeout(timer)
                  waiters.delete(waiter)
                  done(e)
                },
              }
              const timer = setTimeout(() => {
                waiters.delete(waiter)
                fail(new Error(`no matching event within ${timeoutMs} ms (${events.length} received)`))
              }, timeoutMs)
              waiters.add(waiter)
            })
          },
          close: () => req.destroy(),
        })
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** Applies snapshot and update events as the page does: points from the first one received on are replaced. */
export function merged(events: readonly SseEvent[]): { last: DashboardMessage; points: DashboardPoint[] } {
  let points: DashboardPoint[] = []
  let last: DashboardMessage | undefined
  for (const e of events) {
    if (e.event !== 'snapshot' && e.event !== 'update') continue
    const body = JSON.parse(e.data) as DashboardMessage
    if (e.event === 'snapshot') points = []
    const from = body.points[0]?.t
    if (from !== undefined) points = points.filter((p) => p.t < from).concat(body.points)
    last = body
  }
  if (last === undefined) throw new Error('no snapshot received')
  return { last, points }
}

/** Sum of one series over points. */
export const sum = (points: readonly DashboardPoint[], key: string) =>
  points.reduce((n, p) => n + (p.counts[key] ?? 0), 0)

/** The series totals of a message, as `{ key: total }`. */
export const totals = (body: DashboardMessage) => Object.fromEntries(body.series.map((s) => [s.key, s.total]))
