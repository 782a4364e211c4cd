import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

/** How long a closing connection is read at most, and for how long without a byte (nginx's defaults). */
export interface LingerLimits {
  /** nginx's `lingering_time`. */
  readonly totalMs: number
  /** nginx's `lingering_timeout`. */
  readonly idleMs: number
  /** The most bytes read and discarded (checked with the time, every 250 ms); nginx has no such bound. */
  readonly maxBytes: number
}

/** How often a lingering connection's bytes and time are checked. */
const LINGER_TICK_MS = 250

export const LINGER: LingerLimits = { totalMs: 30_000, idleMs: 5_000, maxBytes: 64 * 1024 * 1024 }

const PATCHED = Symbol('edgelimit.lingerOnClose')
/**
 * A server socket as Node's HTTP server keeps it: `parser.incoming` is the request being read,
 * until it has ended (Node clears it then, so that the request can be collected).
 */
type Lingering = Socket & {
  [PATCHED]?: true
  parser?: { incoming?: IncomingMessage | null } | null
}

/**
 * Closes `req`'s connection as nginx's lingering close does when an answer that closes it goes
 * out before the request was read whole (a 413, a 429 to `Expect: 100-continue`): the gateway
 * half-closes (its FIN follows the answer), then reads and discards what the client still sends
 * until the client closes its side, or for at most `limits`. Closed at once with bytes unread,
 * the connection would be reset by the kernel (RFC 9112 §9.6), and a client that reads only once
 * it has sent its body (curl) would lose the answer. A connection whose last request was read
 * whole closes as Node closes it. Call for every request (the 'request' and 'checkContinue'
 * events); Node reads on meanwhile and discards the unread body itself.
 *
 * @example server.prependListener('request', (req) => lingerOnClose(req))
 */
export function lingerOnClose(req: IncomingMessage, limits: LingerLimits = LINGER): void {
  const socket = req.socket as Lingering
  if (socket[PATCHED]) return
  socket[PATCHED] = true
  // What Node's server calls once an answer that closes the connection has been written: maybe
  // before its parser has read the rest of the bytes it holds, so the body is looked at after,
  // through Node's own pointer (a request held here would live as long as its idle connection).
  const destroySoon = socket.destroySoon
  socket.destroySoon = () => {
    socket.destroySoon = destroySoon
    socket.end()
    setImmediate(() => {
      if (socket.parser?.incoming?.complete === false && !socket.destroyed) linger(socket, limits)
      else destroySoon.call(socket)
    })
  }
}

function linger(socket: Socket, limits: LingerLimits): void {
  const started = performance.now()
  const from = socket.bytesRead
  // Node's parser reads the socket itself (no 'data' events): what it read is counted every tick.
  const tick = setInterval(
    () => {
      if (socket.bytesRead - from > limits.maxBytes || performance.now() - started >= limits.totalMs) {
        socket.destroy()
      }
    },
    Math.min(LINGER_TICK_MS, limits.totalMs / 4),
  ).unref()
  // Node's parser restarts a socket's idle timer at every read.
  socket.setTimeout(limits.idleMs, () => socket.destroy())
  // The client's FIN: both sides have ended.
  socket.once('end', () => socket.destroy())
  socket.once('close', () => clearInterval(tick))
}
