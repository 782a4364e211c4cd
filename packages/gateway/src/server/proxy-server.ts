import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Clock } from 'edgelimit'
import type { Logger } from 'pino'
import { sleep } from '../library.js'
import { decide, decideSync, type Verdict } from '../policy/decide.js'
import { canonicalTarget } from '../policy/path.js'
import { fromIncoming, hostLines, type RequestInfo } from '../policy/request.js'
import { refusedForSize } from '../proxy/body-limit.js'
import {
  answerClientError,
  answerCutShort,
  endWithProblem,
  goneStatus,
  sendProblem,
} from '../proxy/problem.js'
import { isWebSocket, replayAsRequest, type TunnelSink, upgradeResponse } from '../proxy/tunnel.js'
import { applyClientTimeouts, CONNECTIONS_CHECK_MS, quietFor } from './client-timeouts.js'
import type { Generation } from './generation.js'
import { lingerOnClose } from './lingering-close.js'
import type { Metrics } from './metrics.js'
import { observe } from './observe.js'
import { type PendingResponses, pendingResponses } from './pending-responses.js'
import { upstreamFailureLog } from './upstream-log.js'

/** The gateway's proxy: its servers, the generation new requests take, and the requests in flight. */
export interface ProxyServer {
  /** The server on the gateway's port (not listening yet). */
  readonly server: Server
  /** Reads upgrades other than WebSocket again as ordinary requests; listens nowhere. */
  readonly plain: Server
  /** Every upgrade's (and CONNECT's) socket, from its upgrade to its close. */
  readonly upgrades: ReadonlySet<Duplex>
  /** The generation new requests take. */
  readonly current: Generation
  /**
   * Puts `next` in force (a reload): new requests take it, the servers and open tunnels get its
   * client timeouts, and the one it replaces is retired (released once its last request is done).
   */
  putInForce(next: Generation): void
  readonly inFlight: number
  readonly draining: boolean
  /**
   * From now on answers close their connection and WebSocket handshakes are refused. `deadline`
   * (`performance.now()` time, default never): when the drain ends; a request held for shaping
   * whose turn comes after it is answered 503 at once rather than cut with its connection.
   */
  drain(deadline?: number): void
  /** Resolves when the last request in flight is done (ask only while some are). */
  drained(): Promise<void>
  /** Sums up the upstream failures not logged yet (see `upstreamFailureLog`): the gateway stops. */
  flushUpstreamLog(): void
}

/** What a request's `Expect` asks of the gateway: a `100 Continue`, or what it cannot meet. */
type Expectation = 'continue' | 'unmet'

/** What the request path needs of the gateway. */
export interface ProxyServerOptions {
  /** The generation in force at start. */
  readonly first: Generation
  readonly metrics: Metrics
  readonly log: Logger
  readonly clock: Clock
  /** Puts a retired generation away once its last request is done. */
  readonly release: (gen: Generation, current: Generation) => void
}

/**
 * Creates the proxy's servers (`listen` is the caller's): each request is decided, then answered
 * or forwarded (a WebSocket upgrade: tunnelled), and counted once answered.
 *
 * @example const proxy = createProxyServer({ first, metrics, log, clock: systemClock, release })
 */
export function createProxyServer({ first, metrics, log, clock, release }: ProxyServerOptions): ProxyServer {
  let current = first
  let inFlight = 0
  let draining = false
  let drained: (() => void) | undefined
  // The responses of the requests in flight: those whose head has not gone out when the drain
  // begins are sent with `Connection: close`, as a request arriving while draining is.
  const answering = new Set<ServerResponse>()
  // The requests held for shaping, and when each one's turn comes (`performance.now()` time).
  const holding = new Map<Handling, { readonly turn: number; readonly verdict: Verdict }>()
  let drainEnds = Number.POSITIVE_INFINITY
  const upstreamFailures = upstreamFailureLog(log, clock)

  /**
   * One request through the gateway: decided, then answered or forwarded (a WebSocket upgrade:
   * tunnelled); counted once answered.
   */
  class Handling implements TunnelSink {
    private settled = false
    private readonly gen = current
    private readonly started = performance.now()
    /**
     * `continues`: the client sent `Expect: 100-continue` and waits for the rules' word to send its
     * body. `upgrade`: a WebSocket handshake, its socket and the bytes read past its head.
     */
    constructor(
      private readonly req: IncomingMessage,
      private readonly res: ServerResponse,
      private readonly continues = false,
      private readonly upgrade?: { readonly socket: Duplex; readonly head: Buffer },
    ) {
      this.gen.inFlight++
      inFlight++
      metrics.inFlight++
      if (draining) res.setHeader('connection', 'close')
      else answering.add(res)
    }

    run(): void {
      try {
        // Rules see, and the upstream gets, one canonical path (ADR 0009).
        const hosts = hostLines(this.req.rawHeaders)
        const canonical =
          hosts > 1
            ? { error: 'The request has more than one Host header.' }
            : hosts === 0 && this.req.httpVersion === '1.1'
              ? { error: 'The request has no Host header (HTTP/1.1 requires one).' }
              : canonicalTarget(this.req.url ?? '/', this.req.headers.host)
        if ('error' in canonical) {
          // The connection closes after it, as after nginx's 400s: what else it carries is suspect.
          sendProblem(this.res, 400, this.req.url ?? '/', canonical.error, [['connection', 'close']])
          this.done(400, 'none')
          return
        }
        this.req.url = canonical.target
        if (
          refusedForSize(this.req, this.res, canonical.target, this.gen.policy.config.clients.maxBodySize)
        ) {
          this.done(413, 'none')
          return
        }
        const policy = this.gen.policy
        const request = fromIncoming(this.req, this.upgrade !== undefined, policy.trustsPeer)
        if (policy.store.inProcess) this.proceed(request, decideSync(policy, request, clock.now()))
        else {
          this.watchAbort()
          decide(policy, request, clock.now()).then(
            (verdict) => this.proceed(request, verdict),
            (error: unknown) => this.fail(error),
          )
        }
      } catch (error) {
        this.fail(error)
      }
    }

    /**
     * An `Expect` other than `100-continue` (RFC 9110 §10.1.1): answered 417 before any rule, as
     * Node would but with a problem, and counted; the body is unread, so the connection closes.
     */
    refuseExpectation(): void {
      this.res.setHeader('connection', 'close')
      sendProblem(
        this.res,
        417,
        this.req.url ?? '/',
        'The request expects what the gateway cannot meet: the only expectation it knows is 100-continue.',
      )
      this.done(417, 'none')
    }

    /**
     * A body in a transfer coding besides chunked (RFC 9112 §6.1): Node takes off the chunked
     * framing alone, and the coding's field is hop-by-hop, so the upstream would read the coded
     * bytes as the body. Answered 501 before any rule, as nginx does; the body is unread.
     */
    refuseCoding(codings: string): void {
      this.res.setHeader('connection', 'close')
      sendProblem(
        this.res,
        501,
        this.req.url ?? '/',
        `The request's body is in a transfer coding the gateway does not decode (Transfer-Encoding: ${codings}): only chunked is.`,
      )
      this.done(501, 'none')
    }

    done(status: number | 'aborted', upstream: number | 'error' | 'aborted' | 'none', error?: Error): void {
      if (this.settled) return
      this.settled = true
      answering.delete(this.res)
      if (status === 499) status = goneStatus(this.req.socket) // a 408 or 400 Node's parser answered
      if (upstream === 'error' && error !== undefined) {
        upstreamFailures.failed({ status, error, method: this.req.method, path: this.req.url })
      }
      const gen = this.gen
      gen.inFlight--
      inFlight--
      metrics.inFlight--
      metrics.response(status, upstream, (performance.now() - this.started) / 1000)
      if (gen.retired && gen.inFlight === 0) release(gen, current)
      if (draining && inFlight === 0) drained?.()
    }

    opened(socket: Duplex): void {
      metrics.tunnels++
      tunnels.add(socket)
      socket.once('close', () => {
        metrics.tunnels--
        tunnels.delete(socket)
      })
      // Closing the client's socket closes the upstream's (the pipe).
      socket.once('timeout', () => socket.destroy())
      quietFor(socket, current.policy.config.clients)
    }

    /**
     * A request held for shaping whose turn comes after the drain ends: a 503 now, with the rate
     * limit fields and a Retry-After of when its turn would have come, not a connection cut then.
     */
    refuseAfterStop(turn: number, verdict: Verdict): void {
      const { req, res } = this
      holding.delete(this)
      if (this.settled || res.destroyed || res.headersSent) return
      const left = Math.max(0, turn - performance.now())
      res.setHeader('connection', 'close')
      sendProblem(
        res,
        503,
        req.url ?? '/',
        `The gateway is shutting down: this request's turn to be forwarded (in ${Math.ceil(left)} ms) comes after it stops.`,
        [...verdict.headers, ['retry-after', String(Math.max(1, Math.ceil(left / 1000)))]],
      )
      this.done(503, 'none')
    }

    // While a request waits (a remote store, a shaping delay), its client may leave.
    private watchAbort(): void {
      this.res.once('close', () => this.done(499, 'aborted'))
    }

    private fail(error: unknown): void {
      const { req, res } = this
      log.error(
        { err: error instanceof Error ? error.message : String(error), path: req.url },
        'request failed',
      )
      if (!res.headersSent && !res.destroyed) {
        sendProblem(res, 500, req.url ?? '/', 'The gateway could not decide on this request.')
      }
      this.done(500, 'none')
    }

    private forward(verdict: Verdict): void {
      const { req, res, gen } = this
      // Only an admitted request is invited to send its body; any other answer (a 429) goes out
      // with `Connection: close` (Node's rule for an expectation not met), its body never read.
      if (this.continues) res.writeContinue()
      const trusted = gen.policy.trustsPeer(req.socket.remoteAddress)
      const upgrade = this.upgrade
      const max = gen.policy.config.clients.maxBodySize
      if (upgrade === undefined) gen.upstream.forward(req, res, verdict.headers, this, trusted, max)
      else gen.upstream.tunnel(req, res, upgrade.socket, upgrade.head, verdict.headers, this, trusted)
    }

    private proceed(request: RequestInfo, verdict: Verdict): void {
      const { res } = this
      if (verdict.parts.length > 0) observe(metrics, log, verdict, request)
      if (verdict.denial !== undefined) {
        const headers: Record<string, string> = {}
        for (const [name, value] of verdict.headers) headers[name.toLowerCase()] = value
        headers['content-type'] = 'application/problem+json'
        headers['cache-control'] = 'no-store'
        headers['content-length'] = String(Buffer.byteLength(verdict.denial.body))
        res.writeHead(verdict.denial.status, headers)
        res.end(verdict.denial.body)
        this.done(verdict.denial.status, 'none')
      } else if (verdict.delayMs > 0) {
        for (const part of verdict.parts) {
          const d = part.decision.delayMs ?? 0
          if (d > 0) metrics.delayed(part.rule.name, d)
        }
        if (!this.settled) this.watchAbort()
        const turn = performance.now() + verdict.delayMs
        if (turn > drainEnds) {
          this.refuseAfterStop(turn, verdict)
          return
        }
        holding.set(this, { turn, verdict })
        // The adapters' hold: a wait longer than one timer takes (a 30-day leak interval) in steps.
        void sleep(verdict.delayMs).then(() => {
          holding.delete(this)
          if (!res.destroyed && !this.settled) this.forward(verdict)
        })
      } else if (res.destroyed) this.done(499, 'aborted')
      else this.forward(verdict)
    }
  }

  /**
   * An HTTP server that hands its requests to `Handling`; `owed`, when given, sees each request
   * first, and what the parser refuses behind a request still being answered waits for it. One
   * listener per event: Node copies the listener array of an event with several.
   */
  /**
   * Whether the request's `Transfer-Encoding` names a coding before its chunked: one that does not
   * end in chunked has no framing, and Node's parser answers it 400 (RFC 9112 §6.3).
   */
  const codedBeyondChunked = (req: IncomingMessage): boolean =>
    /,[\t ]*chunked[\t ]*$/i.test(req.headers['transfer-encoding'] ?? '')

  function httpServer(owed: PendingResponses): Server {
    // Pipelined requests are served one at a time: one waits until the answer before it is
    // complete (Node then gives its response the socket), and none is served after an answer
    // that closed the connection (a 413, a 429 to `Expect`: RFC 9112 §9.6), so none is charged.
    // `expect`: the client's `Expect` asks for a 100 Continue (`continue`) or for what the gateway
    // cannot meet (`unmet`).
    const serve = (req: IncomingMessage, res: ServerResponse, expect?: Expectation): void => {
      if (res.socket === null) res.once('socket', () => serve(req, res, expect))
      else if (!req.socket.writable || answerCutShort(req)) return
      else if (expect === 'unmet') new Handling(req, res).refuseExpectation()
      else if (codedBeyondChunked(req))
        new Handling(req, res).refuseCoding(req.headers['transfer-encoding'] as string)
      else new Handling(req, res, expect === 'continue').run()
    }
    const accept = (req: IncomingMessage, res: ServerResponse, expect?: Expectation): void => {
      owed.track(req, res)
      // An answer that closes the connection with the request's body unread reads it first
      // (nginx's lingering close).
      lingerOnClose(req)
      serve(req, res, expect)
    }
    // Host is checked in `run`, so that a request without one gets a problem like other 400s.
    const s = createServer(
      { requireHostHeader: false, connectionsCheckingInterval: CONNECTIONS_CHECK_MS },
      (req, res) => accept(req, res),
    )
    applyClientTimeouts(s, current.policy.config.clients)
    // Every header line in `req.headers`, which the rules read, as in `rawHeaders`, which the
    // upstream gets (Node's default keeps 1,000 there, more in `rawHeaders`); `maxHeaderSize`
    // (16 KiB) still bounds them.
    s.maxHeadersCount = 0
    // What the parser refuses never becomes a request: counted here (no start time: 0 s, as CONNECT).
    const counted = (status: number) => metrics.response(status, 'none', 0)
    s.on('clientError', (error: Error, socket: Duplex) =>
      answerClientError(error, socket, counted, owed.after),
    )
    // Without this listener Node answers `100 Continue` itself, before any rule has decided.
    s.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => accept(req, res, 'continue'))
    // Without this one Node answers any other expectation with a bare 417, uncounted.
    s.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => accept(req, res, 'unmet'))
    // A reverse proxy opens no CONNECT tunnels: answered (Node would close without a word) and counted.
    // Node hands it over once read, as an upgrade: its answer waits for those owed before it.
    s.on('connect', (_req: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => socket.destroy()) // Node's own listener is gone once it hands the socket over
      handedOver(socket)
      owed.after(socket, () => {
        metrics.response(405, 'none', 0)
        endWithProblem(
          socket,
          405,
          'The gateway does not open tunnels (CONNECT); it forwards requests to its upstream.',
        )
      })
    })
    return s
  }
  // Node hands an upgrade over once read, answers to earlier requests on its connection maybe
  // still going out: it waits for them (`plain` cannot answer on the socket before they are
  // done either). A failure costs that connection, not the process.
  const owed = pendingResponses()
  const server = httpServer(owed)
  // With an 'upgrade' listener Node hands over every request with `Connection: upgrade`: the
  // other upgrades (h2c, …) are read again by `plain`, which has none, as the ordinary requests
  // they were without it. It listens nowhere: 'listening' starts Node's checks of its connections
  // (headers and request timeouts, closeIdleConnections). It tracks its answers too, so that what
  // its parser refuses behind one (bytes after a `Connection: close` request) waits for it: it
  // was answered at once, a 400 in place of the answer to the request already forwarded.
  const plain = httpServer(pendingResponses())
  plain.emit('listening')
  // Every upgrade's (and CONNECT's) socket, from its upgrade to its close (tunnels included, and one
  // still waiting for the answers before it): Node's closeAllConnections no longer knows them.
  const upgrades = new Set<Duplex>()
  const handedOver = (socket: Duplex): void => {
    upgrades.add(socket)
    socket.once('close', () => upgrades.delete(socket))
  }
  // The client sockets of open WebSocket tunnels: a reload gives them its websocketIdleTimeout.
  const tunnels = new Set<Duplex>()
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    handedOver(socket)
    owed.after(socket, () => {
      try {
        if (isWebSocket(req)) websocket(req, socket, head)
        else replayAsRequest(plain, req, socket, head)
      } catch (error) {
        log.error(
          { err: error instanceof Error ? error.message : String(error), path: req.url },
          'upgrade failed',
        )
        socket.destroy()
      }
    })
  })
  function websocket(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy()) // as for CONNECT
    const res = upgradeResponse(req, socket)
    if (!draining) new Handling(req, res, false, { socket, head }).run()
    else {
      // A tunnel opened now would be closed in a moment: the client is told to go elsewhere.
      sendProblem(res, 503, req.url ?? '/', 'The gateway is shutting down; connect again.')
      metrics.response(503, 'none', 0)
    }
  }

  return {
    server,
    plain,
    upgrades,
    get current() {
      return current
    },
    putInForce(next) {
      const old = current
      current = next
      for (const s of [server, plain]) applyClientTimeouts(s, next.policy.config.clients)
      for (const socket of tunnels) quietFor(socket, next.policy.config.clients)
      old.retired = true
      if (old.inFlight === 0) release(old, next)
    },
    get inFlight() {
      return inFlight
    },
    get draining() {
      return draining
    },
    drain(deadline = Number.POSITIVE_INFINITY) {
      draining = true
      drainEnds = deadline
      for (const [handling, held] of holding)
        if (held.turn > deadline) handling.refuseAfterStop(held.turn, held.verdict)
      // A keep-alive answer would invite a next request on a connection about to close (once the
      // last request in flight is done): it would be lost, where a client told to close opens anew.
      for (const res of answering) if (!res.headersSent) res.setHeader('connection', 'close')
      answering.clear()
    },
    drained: () =>
      new Promise<void>((r) => {
        drained = r
      }),
    flushUpstreamLog: () => upstreamFailures.flush(),
  }
}
