import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { type Dispatcher, Pool } from 'undici'
import type { UpstreamConfig } from '../config/types.js'
import { sendProblem } from './problem.js'

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
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly (readonly [string, string])[],
    sink: ForwardSink,
    trusted: boolean,
  ): void
}

/** Told once how a forwarded request ended: the status sent to the client, and the upstream's. */
export interface ForwardSink {
  /** `status` is `aborted` when the answer was cut off after its head (the upstream failed mid-body). */
  done(status: number | 'aborted', upstream: number | 'error' | 'aborted', error?: Error): void
}

// RFC 9110 §7.6.1: meaningful only for one connection. `expect` is answered by this server.
const HOP_BY_HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
  'expect',
])
/**
 * What a client says about itself to the upstream, believed only from a trusted proxy: the
 * `X-Forwarded-*` family (by prefix) and these. From anyone else they are dropped and the
 * gateway sets its own, so that `X-Forwarded-Host: evil.example` cannot poison password-reset
 * links and `X-Real-IP` cannot name another client. Their spellings with `_` for `-` are dropped
 * from everyone (see `isClaim`).
 */
const CLIENT_CLAIMS = new Set([
  'forwarded',
  'x-real-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
])
/** Whether a lower-case header name is one of the client claims above. */
function isClaim(lower: string): boolean {
  return CLIENT_CLAIMS.has(lower) || lower.startsWith('x-forwarded-')
}
// RFC 9112 §4: a reason phrase relayed as is only when made of tab, space and visible ASCII.
const REASON = /^[\t\x20-\x7e]*$/
const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])
// Answers that never have a body (RFC 9110 §6.4.1); a Content-Length on them is the
// representation's (304, §8.6) or a mistake (204), yet undici fails them once their head is in.
const BODILESS = new Set([204, 304])

/** Names listed in a Connection header, which are hop-by-hop too. */
function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined || value === 'keep-alive' || value === 'close') return undefined
  const text = Array.isArray(value) ? value.join(',') : value
  const tokens = text
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '' && t !== 'close' && t !== 'keep-alive')
  return tokens.length === 0 ? undefined : new Set(tokens)
}

/** The client's socket address as text; IPv4-mapped IPv6 shown as IPv4. */
function peerOf(req: IncomingMessage): string {
  const peer = req.socket.remoteAddress ?? 'unknown'
  return peer.startsWith('::ffff:') && peer.includes('.') ? peer.slice(7) : peer
}

/** The request's header lines for the upstream: hop-by-hop and `Proxy` removed, X-Forwarded-* added. */
function requestHeaders(req: IncomingMessage, preserveHost: boolean, trusted: boolean): string[] {
  const raw = req.rawHeaders
  const listed = connectionTokens(req.headers.connection)
  const out: string[] = []
  let forwardedFor: string | undefined
  let forwardedHost = false
  let forwardedProto = false
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    const value = raw[i + 1] as string
    const lower = name.toLowerCase()
    if (HOP_BY_HOP.has(lower) || listed?.has(lower)) continue
    // httpoxy (https://httpoxy.org): a CGI-style upstream would read it as HTTP_PROXY.
    if (lower === 'proxy') continue
    if (lower === 'host' && !preserveHost) continue
    if (!trusted && isClaim(lower)) continue
    // CGI, WSGI and Rack read `X_Forwarded_For` as HTTP_X_FORWARDED_FOR, the same variable as
    // X-Forwarded-For (cf. Puma CVE-2024-45614): no proxy sends that spelling, so it is dropped
    // even from a trusted one. Other names with `_` pass (nginx would drop them all by default).
    if (lower.includes('_') && isClaim(lower.replaceAll('_', '-'))) continue
    if (lower === 'x-forwarded-for') {
      forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`
      continue
    }
    if (lower === 'x-forwarded-host') forwardedHost = true
    else if (lower === 'x-forwarded-proto') forwardedProto = true
    out.push(name, value)
  }
  const peer = peerOf(req)
  out.push('x-forwarded-for', forwardedFor === undefined ? peer : `${forwardedFor}, ${peer}`)
  if (!forwardedHost && req.headers.host !== undefined) out.push('x-forwarded-host', req.headers.host)
  if (!forwardedProto) out.push('x-forwarded-proto', 'http')
  return out
}

/** The upstream's response headers for the client: hop-by-hop removed, rate-limit fields added. */
function responseHeaders(
  headers: IncomingHttpHeaders,
  extra: readonly (readonly [string, string])[],
): OutgoingHttpHeaders {
  const listed = connectionTokens(headers.connection)
  const out: OutgoingHttpHeaders = {}
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || listed?.has(name)) continue
    out[name] = headers[name]
  }
  for (const [name, value] of extra) out[name.toLowerCase()] = value
  return out
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return length === undefined ? req.headers['transfer-encoding'] !== undefined : length !== '0'
}

const CLIENT_GONE = 'the client closed the connection'
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
  // Kept: Node detaches `req.socket` once the response has ended.
  private readonly socket: Watched
  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly extra: readonly (readonly [string, string])[],
    private readonly sink: ForwardSink,
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
    this.socket[SERVING]?.delete(this)
    this.sink.done(status, upstream, error)
  }

  /** The client's connection closed before the answer was complete. */
  clientGone(): void {
    if (this.finished || this.res.writableFinished) return
    this.controller?.abort(new Error(CLIENT_GONE))
    this.finish(499, 'aborted')
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.res.destroyed) controller.abort(new Error(CLIENT_GONE))
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    // undici reports 1xx (103 Early Hints) here too; only the final status starts the answer.
    if (statusCode < 200) return
    if (statusCode === 204) delete headers['content-length'] // RFC 9110 §8.6: a 204 has none
    const out = responseHeaders(headers, this.extra)
    // Node refuses a reason phrase beyond visible ASCII (undici hands it over decoded as UTF-8):
    // such a phrase is dropped, and Node sends the standard one, as a client may ignore it anyway.
    if (statusMessage && REASON.test(statusMessage)) this.res.writeHead(statusCode, statusMessage, out)
    else this.res.writeHead(statusCode, out)
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.res
    if (res.destroyed) this.clientGone()
    else if (!res.write(chunk) && !c.paused) {
      c.pause()
      // A response whose client left never drains, and undici's body timeout sleeps while paused.
      const wake = (): void => {
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

  onResponseEnd(): void {
    this.res.end()
    this.finish(this.res.statusCode, this.res.statusCode)
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    const res = this.res
    if (this.finished || res.destroyed) {
      this.finish(499, 'aborted')
      return
    }
    const code = (error as { code?: string }).code
    if (res.headersSent) {
      if (code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' && BODILESS.has(res.statusCode)) {
        res.end()
        this.finish(res.statusCode, res.statusCode)
        return
      }
      res.destroy(error)
      this.finish('aborted', 'error', error)
      return
    }
    const timeout = TIMEOUTS.has(code ?? '')
    const status = timeout ? 504 : 502
    const reason = code ?? error.message
    try {
      sendProblem(
        res,
        status,
        this.req.url ?? '/',
        timeout
          ? `The upstream did not answer in time (${reason}).`
          : `The upstream could not be reached (${reason}).`,
        this.extra,
      )
    } catch (failure) {
      // No answer can be sent: closing the connection at least does not leave the client waiting.
      res.destroy(failure as Error)
    } finally {
      this.finish(status, 'error', error)
    }
  }
}

/**
 * Opens a keep-alive pool to an upstream.
 *
 * @example
 * const upstream = openUpstream({ url: 'http://127.0.0.1:3000', timeoutMs: 30_000, connectTimeoutMs: 5_000, connections: 128, preserveHost: false })
 * upstream.forward(req, res, headers, { done: (status) => console.log(status) })
 */
export function openUpstream(config: UpstreamConfig): Upstream {
  const url = new URL(config.url)
  const base = url.pathname.replace(/\/+$/, '')
  const pool = new Pool(url.origin, {
    connections: config.connections,
    headersTimeout: config.timeoutMs,
    connect: { timeout: config.connectTimeoutMs },
    keepAliveTimeout: 4_000,
  })
  return {
    signature: JSON.stringify(config),
    url,
    config,
    close: () => pool.close(),
    forward(req, res, extra, sink, trusted) {
      pool.dispatch(
        {
          path: base + (req.url ?? '/'),
          method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
          headers: requestHeaders(req, config.preserveHost, trusted),
          body: hasBody(req) ? req : null,
        },
        new Exchange(req, res, extra, sink),
      )
    },
  }
}
