import {
  type ClientRequest,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  ServerResponse,
} from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { UpstreamConfig } from '../config/types.js'
import type { ForwardSink } from './forward.js'
import { relayedReason, requestHeaders, responseHeaders, writeRelayedHead } from './headers.js'
import { InvalidAnswer, invalidCoding, invalidStatus, sendUpstreamFailure } from './problem.js'

/** A forwarded upgrade's sink: `done` once the handshake is answered, then `opened` on a 101. */
export interface TunnelSink extends ForwardSink {
  /** The upstream switched protocols and the bytes now flow both ways until `socket` closes. */
  opened(socket: Duplex): void
}

/** The request Node handed over on 'upgrade', its socket and the bytes read past its head. */
export interface UpgradeRequest {
  readonly req: IncomingMessage
  /** Answers on `socket` (see `upgradeResponse`) until the upstream switches protocols. */
  readonly res: ServerResponse
  readonly socket: Duplex
  readonly head: Buffer
}

/**
 * Whether an upgrade request asks for a WebSocket (RFC 6455 §4.1: a `GET` whose `Upgrade`
 * lists `websocket`). Node hands over any request with `Connection: upgrade` and an `Upgrade`.
 *
 * @example if (!isWebSocket(req)) replayAsRequest(plain, req, socket, head)
 */
export function isWebSocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade
  return (
    req.method === 'GET' &&
    upgrade !== undefined &&
    upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket')
  )
}

/**
 * A `ServerResponse` on an upgrade request's bare socket, so that what answers ordinary requests
 * (a 429, a problem, a relayed response) answers it too: with `Connection: close`, and the
 * connection closed once the answer is sent. Until then the socket is read (see `hold`).
 *
 * @example const res = upgradeResponse(req, socket); sendProblem(res, 503, '/ws', 'Draining.')
 */
export function upgradeResponse(req: IncomingMessage, socket: Duplex): ServerResponse {
  const res = new ServerResponse(req)
  res.shouldKeepAlive = false
  res.assignSocket(socket as Socket)
  // What Node's server does once a `Connection: close` answer has gone out.
  res.once('finish', () => (socket as Socket).destroySoon())
  hold(socket)
  return res
}

/** What a client may send while its handshake waits: it should send nothing (RFC 6455 §4.1). */
const EARLY_LIMIT = 64 * 1024
/** Stops reading a waiting handshake's socket and gives back the bytes it sent meanwhile. */
const held = new WeakMap<Duplex, () => Buffer>()

/**
 * Reads a handshake's socket while the rules, a shaping delay or the upstream keep it waiting,
 * so that a client that leaves is seen at once: its EOF (or more than `EARLY_LIMIT` bytes)
 * closes the connection, and the request is aborted (499, the upstream's connection closed).
 */
function hold(socket: Duplex): void {
  const chunks: Buffer[] = []
  let size = 0
  const read = (chunk: Buffer) => {
    chunks.push(chunk)
    size += chunk.length
    if (size > EARLY_LIMIT) socket.destroy()
  }
  const leave = () => socket.destroy()
  socket.on('data', read)
  socket.once('end', leave)
  held.set(socket, () => {
    held.delete(socket)
    socket.off('data', read)
    socket.off('end', leave)
    socket.pause()
    return Buffer.concat(chunks)
  })
}

/**
 * Hands an upgrade request that is no WebSocket (`h2c`, …) to `server`, an HTTP server without
 * an 'upgrade' listener, which reads it again from its head as an ordinary request, and keeps the
 * connection. The head is replayed without `Upgrade` and without the `upgrade` token of
 * `Connection`: with them Node's parser would still stop after this request, as after any
 * upgrade, and discard the requests pipelined behind it. Neither reaches the rules or the
 * upstream anyway (hop-by-hop, stripped).
 *
 * @example server.on('upgrade', (req, socket, head) => replayAsRequest(plain, req, socket, head))
 */
export function replayAsRequest(server: Server, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  let text = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`
  const raw = req.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] ?? '').toLowerCase()
    let value = raw[i + 1] ?? ''
    if (name === 'upgrade') continue
    if (name === 'connection') {
      value = value
        .split(',')
        .filter((token) => token.trim().toLowerCase() !== 'upgrade')
        .join(',')
      if (value.trim() === '') continue
    }
    text += `${raw[i]}: ${value}\r\n`
  }
  // Node read the head as latin1 (its header values may hold obs-text bytes): written back alike.
  socket.unshift(Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), head]))
  server.emit('connection', socket)
}

/**
 * Sends a WebSocket handshake on to the upstream, on a connection of its own (the pool's are
 * HTTP's), with the headers an ordinary request gets plus `Connection: Upgrade` and
 * `Upgrade: websocket`. A `101` is relayed with `extra` (the rate-limit fields), then what the
 * client sent meanwhile, and from there bytes are piped both ways (see `pipe`); any other answer
 * is relayed and the connection closed; an upstream that cannot be reached or is too slow gets
 * 502/504.
 *
 * @example openTunnel({ url, base: '', config }, { req, res, socket, head }, headers, sink, false)
 */
export function openTunnel(
  upstream: { readonly url: URL; readonly base: string; readonly config: UpstreamConfig },
  upgrade: UpgradeRequest,
  extra: readonly (readonly [string, string])[],
  sink: TunnelSink,
  trusted: boolean,
): void {
  const { url, base, config } = upstream
  const { req, res, socket, head } = upgrade
  const headers = requestHeaders(req, config.preserveHost, trusted, 'websocket')
  if (!config.preserveHost) headers.push('host', url.host)
  const tls = url.protocol === 'https:'
  const request: ClientRequest = (tls ? httpsRequest : httpRequest)({
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (tls ? 443 : 80) : Number(url.port),
    path: base + (req.url ?? '/'),
    method: 'GET',
    headers,
    agent: false,
  })
  const timeout = (code: string, ms: number) =>
    setTimeout(() => request.destroy(Object.assign(new Error(`no answer within ${ms} ms`), { code })), ms)
  // undici's timeouts for ordinary requests: until connected, then until the response head.
  let timer = timeout('UND_ERR_CONNECT_TIMEOUT', config.connectTimeoutMs)
  let settled = false
  const settle = (status: number | 'aborted', up: number | 'error' | 'aborted', error?: Error) => {
    if (settled) return
    settled = true
    clearTimeout(timer)
    socket.off('close', clientGone)
    sink.done(status, up, error)
  }
  request.once('socket', (s: Socket) => {
    s.once(tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer)
      if (!settled) timer = timeout('UND_ERR_HEADERS_TIMEOUT', config.timeoutMs)
    })
  })
  const clientGone = () => {
    request.destroy()
    settle(499, 'aborted')
  }
  socket.once('close', clientGone)

  // The answer relayed, once its head is in.
  let answered: IncomingMessage | undefined
  request.on('error', (error: Error & { code?: string }) => {
    // Bytes after a whole answer (a 204 with a body): the answer is relayed all the same.
    if (settled || answered?.complete) return
    if (res.headersSent) {
      socket.destroy()
      settle('aborted', 'error', error)
      return
    }
    settle(sendUpstreamFailure(res, req.url ?? '/', error, extra), 'error', error)
  })

  // Any answer but a 101: relayed as an ordinary one, then the connection closes.
  request.on('response', (answer: IncomingMessage) => {
    clearTimeout(timer)
    const status = answer.statusCode ?? 502
    // Node's parser takes any three digits (its server writes none outside 100–999), and a 101
    // without `Connection: upgrade` is an answer here (other 1xx are 'information'): a switch to
    // no protocol.
    const error =
      status === 101
        ? new InvalidAnswer(
            'The upstream answered 101 Switching Protocols without Connection: upgrade, so it switched to no protocol.',
          )
        : status < 100 || status > 599
          ? invalidStatus(status)
          : invalidCoding(answer.headers)
    if (error !== undefined) {
      request.destroy()
      settle(sendUpstreamFailure(res, req.url ?? '/', error, extra), 'error', error)
      return
    }
    answered = answer
    const out = responseHeaders(answer.headers, extra)
    writeRelayedHead(res, status, answer.statusMessage, out)
    // Cut off mid-body: the client's answer is cut off too.
    answer.once('close', () => {
      if (answer.complete) return
      socket.destroy()
      settle('aborted', 'error')
    })
    res.once('finish', () => settle(status, status))
    answer.pipe(res)
  })

  request.on('upgrade', (answer: IncomingMessage, upSocket: Duplex, upHead: Buffer) => {
    clearTimeout(timer)
    upSocket.on('error', () => upSocket.destroy())
    if (settled || socket.destroyed) {
      upSocket.destroy()
      return
    }
    const out: OutgoingHttpHeaders = responseHeaders(answer.headers, extra)
    const phrase = relayedReason(answer.statusMessage) ?? 'Switching Protocols'
    let text = `HTTP/1.1 101 ${phrase}\r\n`
    for (const [name, value] of Object.entries(out)) {
      for (const v of Array.isArray(value) ? value : [value]) text += `${name}: ${v}\r\n`
    }
    text += `connection: Upgrade\r\nupgrade: ${answer.headers.upgrade ?? 'websocket'}\r\n\r\n`
    // The socket is the tunnel's from here on: no response writes on it any more.
    res.detachSocket(socket as Socket)
    const ahead = Buffer.concat([head, held.get(socket)?.() ?? Buffer.alloc(0)])
    socket.write(text, 'latin1')
    if (upHead.length > 0) socket.write(upHead)
    if (ahead.length > 0) upSocket.write(ahead)
    settle(101, 101)
    pipe(socket, upSocket)
    sink.opened(socket)
  })
  request.end()
}

/**
 * How long a tunnel stays half-closed: once one side has ended (sent its FIN), the other is
 * ended too and has this long to close before both are destroyed.
 */
export const TUNNEL_CLOSE_GRACE_MS = 5_000

/**
 * Pipes two sockets into each other: the end of one ends the other (a WebSocket's closing
 * handshake then closes both), and an error or close of one destroys the other. A side that has
 * not closed `TUNNEL_CLOSE_GRACE_MS` after the first end is destroyed with the other: server
 * sockets allow half-open connections, and a peer that ignores an EOF would hold both forever.
 */
function pipe(a: Duplex, b: Duplex): void {
  let grace: NodeJS.Timeout | undefined
  const destroyBoth = () => {
    clearTimeout(grace)
    a.destroy()
    b.destroy()
  }
  const ended = () => {
    grace ??= setTimeout(destroyBoth, TUNNEL_CLOSE_GRACE_MS).unref()
  }
  for (const s of [a, b]) {
    s.on('error', destroyBoth)
    s.once('close', destroyBoth)
    s.once('end', ended)
    ;(s as Partial<Socket>).setNoDelay?.(true)
  }
  a.pipe(b)
  b.pipe(a)
}
