import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { type Dispatcher, Pool } from 'undici'
import type { UpstreamConfig } from '../config/types.js'
import { BodyTooLarge, refuseTooLarge, upTo } from './body-limit.js'
import { requestHeaders, responseHeaders, responseTrailers, writeRelayedHead } from './headers.js'
import { invalidCoding, invalidStatus, sendUpstreamFailure } from './problem.js'
import { openTunnel, type TunnelSink } from './tunnel.js'

/** An upstream origin and its keep-alive connection pool. */
export interface Upstream {
  /** The upstream's configuration as JSON: an unchanged upstream keeps its pool on reload. */
  readonly signature: string
  readonly url: URL
  readonly config: UpstreamConfig
  /** Waits for the requests in flight, then closes the connections. */
  close(): Promise<void>
  /**
   * Sends a request on and streams the answer back; `sink.done` reports how it ended. `trusted`:
   * the peer is one of our proxies (`identity`), so the forwarding headers it sent are kept.
   * `maxBodySize`: a body without `Content-Length` that grows past it is cut off (413).
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly (readonly [string, string])[],
    sink: ForwardSink,
    trusted: boolean,
    maxBodySize?: number,
  ): void
  /**
   * Opens a WebSocket tunnel for an upgrade request (`res` answers on its `socket`; `head`: the
   * bytes that came after its head) on a connection of its own, outside the pool.
   */
  tunnel(
    req: IncomingMessage,
    res: ServerResponse,
    socket: Duplex,
    head: Buffer,
    extra: readonly (readonly [string, string])[],
    sink: TunnelSink,
    trusted: boolean,
  ): void
}

/** Told once how a forwarded request ended: the status sent to the client, and the upstream's. */
export interface ForwardSink {
  /** `status` is `aborted` when the answer was cut off after its head (the upstream failed mid-body). */
  done(status: number | 'aborted', upstream: number | 'error' | 'aborted', error?: Error): void
}

// Answers that never have a body (RFC 9110 §6.4.1); a Content-Length on them is the
// representation's (304, §8.6) or a mistake (204), yet undici fails them once their head is in.
const BODILESS = new Set([204, 304])
const CLOSE = ['connection', 'close'] as const

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return length === undefined ? req.headers['transfer-encoding'] !== undefined : length !== '0'
}

const CLIENT_GONE = 'the client closed the connection'

/**
 * What a request that waited `upstream.timeout` for a free connection of the pool fails with: undici
 * counts its timeouts from the request's start on a connection, and keeps the rest queued without
 * a limit (a stalled upstream would make the last of them wait one timeout per request before it).
 */
export class PoolTimeout extends Error {
  readonly code = 'UPSTREAM_BUSY'
  constructor(connections: number) {
    super(`no connection to it was free within upstream.timeout: all ${connections} busy or being opened`)
    this.name = 'PoolTimeout'
  }
}
// The exchanges a connection is serving, more than one when requests are pipelined: one 'close'
// listener per connection, not per request, and every exchange is ended when the client goes.
const SERVING = Symbol('edgelimit.exchanges')
type Watched = Socket & { [SERVING]?: Set<Exchange> }

function onSocketClose(this: Watched): void {
  for (const exchange of this[SERVING] ?? []) exchange.clientGone()
}

/** One forwarded exchange: undici calls these methods as the upstream answers. */
class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined
  private finished = false
  // Whether a body byte was relayed: Node sends a response's head with its first body bytes.
  private relayed = false
  // Kept: Node detaches `req.socket` once the response has ended.
  private readonly socket: Watched
  // Until the request starts on a connection of the pool (see `PoolTimeout`), then while the
  // answer waits for its client to read (`upstream.bodyTimeout`); cleared when the exchange ends.
  private timer: NodeJS.Timeout | undefined
  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly extra: readonly (readonly [string, string])[],
    private readonly sink: ForwardSink,
    private readonly bodyTimeoutMs: number,
  ) {
    const socket = req.socket as Watched
    let serving = socket[SERVING]
    if (serving === undefined) {
      serving = new Set()
      socket[SERVING] = serving
      socket.once('close', onSocketClose)
    }
    serving.add(this)
    this.socket = socket
  }

  private finish(status: number | 'aborted', upstream: number | 'error' | 'aborted', error?: Error): void {
    if (this.finished) return
    this.finished = true
    clearTimeout(this.timer)
    this.socket[SERVING]?.delete(this)
    this.sink.done(status, upstream, error)
  }

  /** The client's connection closed before the answer was complete. */
  clientGone(): void {
    if (this.finished || this.res.writableFinished) return
    // Counted first: the abort reports to onResponseError at once, where a response not yet
    // marked destroyed (this listener can run before Node's own) would be answered as a 502.
    this.finish(499, 'aborted')
    this.controller?.abort(new Error(CLIENT_GONE))
  }

  /** A request body not read whole yet: an answer now closes the connection it would hold. */
  private bodyUnread(): boolean {
    return hasBody(this.req) && !this.req.readableEnded
  }

  /**
   * Answers a failure of the upstream's before its head (502, 504) with the rate-limit fields, and
   * `Connection: close` while the body is unread: undici holds the request, so Node would not read
   * the rest of it, and the connection would sit until `clients.requestTimeout`.
   */
  private answerFailure(error: Error): number {
    const extra = this.bodyUnread() ? [...this.extra, CLOSE] : this.extra
    return sendUpstreamFailure(this.res, this.req.url ?? '/', error, extra)
  }

  /**
   * Given to undici and not started yet (no free connection, or one being opened): it may wait up
   * to `timeoutMs` for one. One started at once (a free keep-alive connection) sets no timer.
   */
  queued(timeoutMs: number, connections: number): void {
    if (this.finished || this.controller !== undefined) return
    this.timer = setTimeout(() => this.waitedTooLong(connections), timeoutMs)
  }

  /**
   * Still queued after `upstream.timeout`: answered 504 now, and aborted when undici starts it
   * (a queued request cannot be taken back before).
   */
  private waitedTooLong(connections: number): void {
    if (this.finished || this.controller !== undefined) return
    const error = new PoolTimeout(connections)
    this.finish(this.answerFailure(error), 'error', error)
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    clearTimeout(this.timer)
    if (this.res.destroyed) controller.abort(new Error(CLIENT_GONE))
    else if (this.finished) controller.abort(new Error('answered while waiting for a connection'))
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    // undici reports 1xx (103 Early Hints) here too; only the final status starts the answer.
    if (statusCode < 200) return
    const invalid = statusCode > 599 ? invalidStatus(statusCode) : invalidCoding(headers)
    if (invalid !== undefined) {
      // Answered as a 502 by onResponseError, which the abort reports to at once.
      this.controller?.abort(invalid)
      return
    }
    if (statusCode === 204) delete headers['content-length'] // RFC 9110 §8.6: a 204 has none
    const out = responseHeaders(headers, this.extra)
    // Announced trailer fields are relayed, and so is their announcement when the client's answer
    // can carry them (Node refuses a `Trailer` on any other).
    if (headers.trailer !== undefined && this.chunked(statusCode, out)) out.trailer = headers.trailer
    // The upstream answered before the body was read whole (it may never read it): the rest of
    // it would hold the connection until requestTimeout, so the answer closes it (as nginx does).
    if (this.bodyUnread()) out.connection = 'close'
    writeRelayedHead(this.res, statusCode, statusMessage, out)
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.res
    if (res.destroyed) {
      this.clientGone()
      return
    }
    this.relayed = true
    if (!res.write(chunk) && !c.paused) {
      c.pause()
      // A response whose client left never drains, and undici's body timeout sleeps while paused:
      // a client that stops reading would hold its upstream connection for ever.
      this.timer = setTimeout(() => {
        res.off('drain', wake)
        res.off('close', wake)
        this.clientStalled()
      }, this.bodyTimeoutMs)
      const wake = (): void => {
        clearTimeout(this.timer)
        res.off('drain', wake)
        res.off('close', wake)
        if (res.destroyed) this.clientGone()
        // Node may emit 'drain' inside another write on this connection (a pipelined response's,
        // from undici's parser of another upstream connection), where undici cannot resume a parser.
        else queueMicrotask(() => c.resume())
      }
      res.once('drain', wake)
      res.once('close', wake)
    }
  }

  /** The client read no byte of the answer for `upstream.bodyTimeout`: cut off, upstream included. */
  private clientStalled(): void {
    const error = new Error('the client read no byte of the answer within upstream.bodyTimeout')
    // Counted first: the abort reports to onResponseError at once.
    this.finish('aborted', 'aborted', error)
    this.res.destroy()
    this.controller?.abort(error)
  }

  /**
   * Whether Node sends this answer to its client chunked, the one framing with room for trailer
   * fields: an HTTP/1.1 request's answer that has a body and no `Content-Length`.
   */
  private chunked(status: number, out: OutgoingHttpHeaders): boolean {
    const { req } = this
    return (
      req.httpVersionMajor === 1 &&
      req.httpVersionMinor >= 1 &&
      req.method !== 'HEAD' &&
      !BODILESS.has(status) &&
      out['content-length'] === undefined
    )
  }

  onResponseEnd(_c: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    // Node sends them after a chunked body, and drops them from any other answer (HTTP/1.0).
    const fields = responseTrailers(trailers)
    if (fields.length > 0) this.res.addTrailers(fields)
    this.res.end()
    this.finish(this.res.statusCode, this.res.statusCode)
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    const res = this.res
    if (this.finished || res.destroyed) {
      this.finish(499, 'aborted')
      return
    }
    // A chunked body past `clients.maxBodySize`: the upstream request is aborted with it.
    if (error instanceof BodyTooLarge) {
      if (res.headersSent) {
        this.cutOff()
        this.finish('aborted', 'aborted', error)
      } else {
        refuseTooLarge(res, this.req.url ?? '/', error.max, this.extra)
        this.finish(413, 'aborted', error)
      }
      return
    }
    const code = (error as { code?: string }).code
    if (res.headersSent) {
      if (code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' && BODILESS.has(res.statusCode)) {
        res.end()
        this.finish(res.statusCode, res.statusCode)
        return
      }
      this.cutOff()
      this.finish('aborted', 'error', error)
      return
    }
    this.finish(this.answerFailure(error), 'error', error)
  }

  /** Closes the connection of an answer whose head was relayed: the client sees it cut off. */
  private cutOff(): void {
    const res = this.res
    if (this.relayed) {
      res.destroy()
      return
    }
    // The head has not left yet (no body byte did): destroyed now, the client would get no byte
    // at all. It is sent alone, and the connection closes once it is out.
    res.flushHeaders()
    res.socket?.destroySoon()
  }
}

/**
 * Opens a keep-alive pool to an upstream.
 *
 * @example
 * const upstream = openUpstream({ url: 'http://127.0.0.1:3000', timeoutMs: 30_000, connectTimeoutMs: 5_000, bodyTimeoutMs: 300_000, connections: 128, preserveHost: false })
 * upstream.forward(req, res, headers, { done: (status) => console.log(status) })
 */
export function openUpstream(config: UpstreamConfig): Upstream {
  const url = new URL(config.url)
  const base = url.pathname.replace(/\/+$/, '')
  const pool = new Pool(url.origin, {
    connections: config.connections,
    headersTimeout: config.timeoutMs,
    bodyTimeout: config.bodyTimeoutMs,
    connect: { timeout: config.connectTimeoutMs },
    keepAliveTimeout: 4_000,
  })
  return {
    signature: JSON.stringify(config),
    url,
    config,
    close: () => pool.close(),
    forward(req, res, extra, sink, trusted, maxBodySize) {
      // A declared length is checked before the rules (and Node reads no more than it says).
      const counted = req.headers['content-length'] === undefined ? maxBodySize : undefined
      const exchange = new Exchange(req, res, extra, sink, config.bodyTimeoutMs)
      pool.dispatch(
        {
          path: base + (req.url ?? '/'),
          method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
          headers: requestHeaders(req, config.preserveHost, trusted),
          body: hasBody(req) ? (counted === undefined ? req : upTo(req, counted)) : null,
        },
        exchange,
      )
      exchange.queued(config.timeoutMs, config.connections)
    },
    tunnel(req, res, socket, head, extra, sink, trusted) {
      openTunnel({ url, base, config }, { req, res, socket, head }, extra, sink, trusted)
    },
  }
}
