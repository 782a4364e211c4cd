import type { IncomingMessage, ServerResponse } from 'node:http'
import { sendProblem } from '../proxy/problem.js'
import type { DashboardData, DashboardPoint, Outcome } from './dashboard-data.js'
import { expectedOutcomes, OUTCOMES } from './dashboard-data.js'
import { renderDashboardPage } from './dashboard-page.js'

/** What the gateway is running now, shown beside the counts. */
export interface DashboardContext {
  readonly rules: readonly {
    readonly name: string
    readonly mode: 'enforce' | 'shadow'
    readonly enforce: number
  }[]
  readonly store: { readonly type: string; readonly status: string }
  readonly generation: number
  readonly draining: boolean
}

export interface DashboardOptions {
  readonly data: DashboardData
  context(): DashboardContext
  /** How often each client gets an update. @default 1000 */
  readonly intervalMs?: number
  /** Clients served at once; more get 503. @default 32 */
  readonly maxClients?: number
  /** Rows of the top-keys table. @default 20 */
  readonly topKeys?: number
  /** The browser's reconnection delay (the stream's `retry:`). @default 2000 */
  readonly retryMs?: number
  /**
   * A client whose socket stays full (it reads nothing) for this long, counted in skipped updates
   * (`stalledMs / intervalMs`), is dropped: its slot is freed. @default 30000
   */
  readonly stalledMs?: number
}

/** `GET /dashboard` and its event stream `GET /dashboard/events`. */
export interface Dashboard {
  /** Answers the request when it is the dashboard's; `false` otherwise. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean
  /** Streams open now. */
  readonly clients: number
  /** Whether the update timer runs (only while a client is connected). */
  readonly ticking: boolean
  /** Ends every stream and stops the timer; later requests get 503. */
  close(): void
}

/** A series on the wire: one rule's count of one outcome. */
export interface WireSeries {
  readonly key: string
  readonly rule: string
  readonly outcome: Outcome
  readonly total: number
}

/** The body of a `snapshot` (every kept point) or `update` (points from the client's last one on) event. */
export interface DashboardMessage {
  readonly now: number
  readonly seconds: number
  readonly series: readonly WireSeries[]
  readonly points: readonly DashboardPoint[]
  readonly topKeys: ReturnType<DashboardData['topKeys']>
  readonly keys: ReturnType<DashboardData['keyStats']>
  readonly breakers: ReturnType<DashboardData['breakers']>
  readonly storeErrors: Readonly<Record<string, number>>
  readonly context: DashboardContext
}

interface Client {
  readonly res: ServerResponse
  /** The epoch second of the last point sent (sent again: it was partial). */
  last: number
  /** The socket's buffer is full: skip updates until it drains. */
  blocked: boolean
  /** Updates skipped since it filled. */
  skipped: number
}

/**
 * The series to draw: those of the rules in force (by mode), in policy order, then any other
 * with data (a rule since removed by a reload).
 */
export function seriesFor(data: DashboardData, context: DashboardContext): WireSeries[] {
  const known = new Map(data.series().map((s) => [s.key, s]))
  const out: WireSeries[] = []
  const seen = new Set<string>()
  for (const rule of context.rules) {
    for (const outcome of OUTCOMES) {
      const key = `${rule.name}/${outcome}`
      const s = known.get(key)
      // A series not listed (never counted, or forgotten while idle) is shown with its total since
      // the start when its rule's mode expects it or that total is not 0.
      const total = s === undefined ? data.total(rule.name, outcome) : s.total
      if (s === undefined && total === 0 && !expectedOutcomes(rule).includes(outcome)) continue
      out.push(s ?? { key, rule: rule.name, outcome, total })
      seen.add(key)
    }
  }
  for (const s of known.values()) if (!seen.has(s.key)) out.push(s)
  return out
}

/**
 * Creates the live dashboard: a self-contained page (uPlot inlined, no external request) fed by
 * Server-Sent Events — a `snapshot` on connect, then an `update` per interval with the points
 * since the last one sent. One timer serves every client and runs only while one is connected;
 * a client that leaves is forgotten at once, one that reads nothing for `stalledMs` is dropped,
 * and `close()` ends every stream (the admin server and the process can then stop).
 *
 * @example const dashboard = createDashboard({ data: metrics.dashboard, context }); dashboard.handle(req, res, path)
 */
export function createDashboard(options: DashboardOptions): Dashboard {
  const { data } = options
  const intervalMs = options.intervalMs ?? 1000
  const maxClients = options.maxClients ?? 32
  const retryMs = options.retryMs ?? 2000
  const maxSkipped = Math.max(1, Math.ceil((options.stalledMs ?? 30_000) / intervalMs))
  const clients = new Set<Client>()
  let timer: NodeJS.Timeout | undefined
  let closed = false
  let page: string | undefined

  function message(since?: number): DashboardMessage {
    const context = options.context()
    return {
      now: Date.now(),
      seconds: data.seconds,
      series: seriesFor(data, context),
      points: data.points(since),
      topKeys: data.topKeys(options.topKeys ?? 20),
      keys: data.keyStats(),
      breakers: data.breakers(),
      storeErrors: data.storeErrors(),
      context,
    }
  }

  function send(client: Client, event: 'snapshot' | 'update', body: DashboardMessage): void {
    const last = body.points[body.points.length - 1]
    if (last !== undefined) client.last = last.t
    const ok = client.res.write(`event: ${event}\ndata: ${JSON.stringify(body)}\n\n`)
    if (!ok) {
      client.blocked = true
      client.res.once('drain', () => {
        client.blocked = false
        client.skipped = 0
      })
    }
  }

  function tick(): void {
    // Clients that are up to the same second share one message.
    const bySince = new Map<number, DashboardMessage>()
    // A Set's iteration goes on past the one deleted (`drop`) under it.
    for (const client of clients) {
      if (client.blocked) {
        // A client that reads nothing would hold its slot for good: 32 of them lock everyone out.
        if (++client.skipped >= maxSkipped) {
          drop(client)
          client.res.destroy()
        }
        continue
      }
      let body = bySince.get(client.last)
      if (body === undefined) {
        body = message(client.last)
        bySince.set(client.last, body)
      }
      send(client, 'update', body)
    }
  }

  function drop(client: Client): void {
    if (!clients.delete(client)) return
    if (clients.size === 0 && timer !== undefined) {
      clearInterval(timer)
      timer = undefined
    }
  }

  function stream(req: IncomingMessage, res: ServerResponse): void {
    if (closed || clients.size >= maxClients) {
      const [code, detail] = closed
        ? ['ERR_STOPPING', 'The gateway is stopping.']
        : ['ERR_TOO_MANY_CLIENTS', `Too many dashboard clients (${maxClients} at once): try again later.`]
      sendProblem(res, 503, req.url ?? '/dashboard/events', detail, [['retry-after', '5']], code)
      return
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    })
    req.socket.setNoDelay(true)
    res.write(`retry: ${retryMs}\n\n`)
    const client: Client = { res, last: Number.NEGATIVE_INFINITY, blocked: false, skipped: 0 }
    clients.add(client)
    res.once('close', () => drop(client))
    res.on('error', () => drop(client))
    send(client, 'snapshot', message())
    if (timer === undefined) {
      timer = setInterval(tick, intervalMs)
      // The stream never keeps the process alive on its own.
      timer.unref()
    }
  }

  return {
    handle(req, res, path) {
      if (path !== '/dashboard' && path !== '/dashboard/' && path !== '/dashboard/events') return false
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        // As the operations port's other paths answer one (admin.ts).
        const allow = 'GET, HEAD'
        const detail = `${req.method} is not allowed here: ${allow}.`
        sendProblem(res, 405, path, detail, [['allow', allow]], 'ERR_METHOD')
        return true
      }
      if (path === '/dashboard/events') {
        if (req.method === 'HEAD')
          res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' }).end()
        else stream(req, res)
        return true
      }
      page ??= renderDashboardPage()
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        'content-security-policy':
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      res.end(req.method === 'HEAD' ? undefined : page)
      return true
    },
    get clients() {
      return clients.size
    },
    get ticking() {
      return timer !== undefined
    },
    close() {
      closed = true
      for (const client of [...clients]) {
        drop(client)
        client.res.end()
      }
      if (timer !== undefined) clearInterval(timer)
      timer = undefined
    },
  }
}
