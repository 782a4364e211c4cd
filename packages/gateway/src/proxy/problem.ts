import { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'

// Node still names these as RFC 7231 did; RFC 9110 §15.5.14 and §15.5.21 renamed them.
const TITLES: Readonly<Record<number, string>> = { 413: 'Content Too Large', 422: 'Unprocessable Content' }

/** Upstream error codes (undici's, and the WebSocket handshake's alike) meaning "too slow". */
const UPSTREAM_TIMEOUTS = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UPSTREAM_BUSY',
])

/**
 * Upstream errors (undici's, and Node's HTTP client's for a WebSocket handshake) of an upstream
 * that was reached: it closed the connection before its answer's head, or sent one that is not
 * HTTP. Any other error before an answer is taken as the upstream not reached.
 */
const CLOSED_EARLY = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])
const NOT_HTTP = new Set(['UND_ERR_HEADERS_OVERFLOW', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'])

/**
 * undici's messages for an interim status it destroys the connection for (its `SocketError`,
 * `UND_ERR_SOCKET`, as for a connection closed early): the upstream did answer.
 */
const INTERIM: ReadonlyMap<string, string> = new Map([
  ['bad upgrade', 'The upstream switched protocols (101) for a request that asked for no upgrade'],
  [
    'bad response',
    'The upstream sent a 100 Continue the gateway did not ask for, which its HTTP client does not take',
  ],
])

/** An upstream's answer the gateway does not relay (a 502): its message is the problem's detail. */
export class InvalidAnswer extends Error {
  readonly code = 'UPSTREAM_INVALID_ANSWER'
  constructor(detail: string) {
    super(detail)
    this.name = 'InvalidAnswer'
  }
}

/**
 * A final status outside 100–599 (RFC 9110 §15: invalid, to be taken as a 5xx): answered 502
 * rather than relayed with a status its clients have no class for.
 */
export const invalidStatus = (status: number): InvalidAnswer =>
  new InvalidAnswer(`The upstream's answer is not valid HTTP (status ${status} is not one of 100–599).`)

/**
 * An answer in a transfer coding besides chunked (`gzip, chunked`): its HTTP client takes off the
 * chunked framing alone, so the client would get the coded bytes as the body. A 502, as nginx has.
 */
export function invalidCoding(headers: IncomingHttpHeaders): InvalidAnswer | undefined {
  const codings = headers['transfer-encoding']
  if (codings === undefined || String(codings).trim().toLowerCase() === 'chunked') return undefined
  return new InvalidAnswer(
    `The upstream's answer is in a transfer coding the gateway does not decode (Transfer-Encoding: ${codings}).`,
  )
}

/** The detail of a 502: what became of the request, as far as the gateway can tell. */
function badGatewayDetail(error: Error & { code?: string }, reason: string): string {
  const code = error.code ?? ''
  const interim = code === 'UND_ERR_SOCKET' ? INTERIM.get(error.message) : undefined
  if (interim !== undefined) return `${interim} (${code}: ${error.message}).`
  if (error instanceof InvalidAnswer) return error.message
  // undici's parser takes any three digits and any 101, then asserts a final status of at least
  // 100, and `Connection: upgrade` in a 101.
  if (code === 'ERR_ASSERTION' && error.message.includes('statusCode >= 100'))
    return "The upstream's answer is not valid HTTP (a status below 100)."
  if (code === 'ERR_ASSERTION' && error.message.includes('assert(upgrade)'))
    return `${INTERIM.get('bad upgrade')} (a 101 without Connection: upgrade).`
  if (CLOSED_EARLY.has(code)) return `The upstream closed the connection before it answered (${reason}).`
  // undici's parser errors carry no code; Node's carry an HPE_ one.
  if (NOT_HTTP.has(code) || code.startsWith('HPE_') || error.name === 'HTTPParserError')
    return `The upstream's answer is not valid HTTP (${reason}).`
  return `The upstream could not be reached (${reason}).`
}

/**
 * Answers a request whose upstream failed before its answer began: 504 when it was too slow,
 * 502 when it could not be reached, closed the connection before answering, or answered with what
 * is not HTTP (the detail says which, with the error's code or message). When no answer can be
 * sent, the connection is closed: the client is not left waiting. Returns the status.
 *
 * @example const status = sendUpstreamFailure(res, '/orders', error, rateLimitFields)
 */
export function sendUpstreamFailure(
  res: ServerResponse,
  instance: string,
  error: Error & { code?: string },
  extra: readonly (readonly [string, string])[],
): 502 | 504 {
  const code = error.code
  const status = UPSTREAM_TIMEOUTS.has(code ?? '') ? 504 : 502
  // The gateway's own (a request that found no free connection) says it in words.
  const reason = code === undefined || code === 'UPSTREAM_BUSY' ? error.message : code
  try {
    sendProblem(
      res,
      status,
      instance,
      status === 504 ? `The upstream did not answer in time (${reason}).` : badGatewayDetail(error, reason),
      extra,
    )
  } catch (failure) {
    res.destroy(failure as Error)
  }
  return status
}

/**
 * Answers with an RFC 9457 problem (`application/problem+json`, `Cache-Control: no-store`) for
 * the gateway's own errors: 502/504 for upstream failures, 500, 503 while draining. `code`, when
 * given, is an extension member (`"code": "ERR_BODY"`) a client can branch on.
 *
 * @example sendProblem(res, 502, '/orders', 'The upstream could not be reached (ECONNREFUSED).')
 */
export function sendProblem(
  res: ServerResponse,
  status: number,
  instance: string,
  detail: string,
  extra: readonly (readonly [string, string])[] = [],
  code?: string,
): void {
  const body = JSON.stringify({
    type: 'about:blank',
    title: TITLES[status] ?? STATUS_CODES[status] ?? 'Error',
    status,
    ...(code === undefined ? {} : { code }),
    detail,
    instance,
  })
  const headers: Record<string, string> = {}
  for (const [name, value] of extra) headers[name.toLowerCase()] = value
  headers['content-type'] = 'application/problem+json'
  headers['cache-control'] = 'no-store'
  headers['content-length'] = String(Buffer.byteLength(body))
  // A reason phrase left by a writeHead that threw (one Node refused) would make this one throw too.
  res.statusMessage = ''
  res.writeHead(status, headers)
  res.end(body)
}

// Node's own answers to what its parser refuses (its default 'clientError' handling).
const PARSER_STATUS: Readonly<Record<string, number>> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
}

/**
 * A server's 'clientError' handler: what Node's HTTP parser refuses (a target that is no path, a
 * malformed header, headers too large) or a header timeout (408) is answered with a problem, as
 * the gateway's own 400s are, instead of Node's empty one; then the connection closes.
 *
 * A request pipelined behind one still being answered (that one read to its end) waits its turn
 * when `after` is given (`PendingResponses.after`): the answers owed before it go out first, so a
 * client never reads the 400 as the answer to an earlier request, nor loses one streaming. Without
 * `after` (a server that tracks no responses) it is answered at once.
 *
 * `count(status)` is called once the answer went to a request that never reached the request
 * handler (one for the metrics to count); not when nothing was answered (a reset, a peer gone, a
 * response already begun, or complete for the request still being read, a client gone before its
 * turn), nor for a request that the handler has and counts itself.
 *
 * @example server.on('clientError', (error, socket) => answerClientError(error, socket, count, owed.after))
 */
export function answerClientError(
  error: Error & { code?: string },
  socket: Duplex,
  count: (status: number) => void,
  after?: (socket: Duplex, next: () => void) => void,
): void {
  const { _httpMessage: inFlight, parser } = socket as ServerSocket
  const queued: Queued = socket
  // The parser fails again on whatever else arrives on the connection: one answer is enough.
  if (queued[QUEUED] !== undefined) return
  if (error.code !== 'ECONNRESET' && socket.writable && inFlight?.req.complete === true && after) {
    // The request being read may be in the handler's hands already (its head was complete), and
    // waits for its turn among the answers owed: its body can never complete now, so it is
    // answered in its turn (`answerCutShort`) rather than waited for.
    queued[QUEUED] = () => count(answer(error, socket))
    after(socket, () => {
      // The answers before it may have closed the connection (`Connection: close`).
      if (!socket.writable) socket.destroy()
      else count(answer(error, socket))
    })
    return
  }
  // Nothing can be said once a response on this connection has begun, or to a peer that is gone;
  // nor for a request still being read whose answer is complete (a 429 kept alive, its body
  // unread, then the client ends mid-body): that answer was its one, and is counted already.
  if (
    error.code === 'ECONNRESET' ||
    !socket.writable ||
    inFlight?.headersSent === true ||
    (inFlight == null && parser?.incoming?.complete === false)
  ) {
    socket.destroy()
    return
  }
  const status = answer(error, socket)
  if (inFlight == null) {
    count(status)
    return
  }
  // A request whose body timed out (408) or was refused mid-way (400) is in the handler's hands:
  // the connection's close ends it, counted as this answer (`goneStatus`) rather than as a 499.
  const answered: Answered = socket
  answered[ANSWERED] = status
}

/** Sends the problem for what the parser refused (or a 408), closing the connection; its status. */
function answer(error: Error & { code?: string }, socket: Duplex): number {
  const status = PARSER_STATUS[error.code ?? ''] ?? 400
  endWithProblem(
    socket,
    status,
    status === 408
      ? 'The request did not arrive in time (clients.headersTimeout for its headers, clients.requestTimeout for all of it).'
      : `The request is not valid HTTP/1.1 (${error.code}: ${error.message.replace(/^Parse Error: /, '')})${hint(error)}.`,
  )
  return status
}

/**
 * What to do about a target Node's parser refuses for a character in it (raw UTF-8 in a path, a
 * space): nothing else reads it, `insecureHTTPParser` included. ASCII only, as the problem is.
 */
function hint(error: Error & { code?: string }): string {
  return error.code === 'HPE_INVALID_URL' && error.message.includes('Invalid char')
    ? ': a character beyond ASCII, a space or a control character in the target must be percent-encoded, as UTF-8 bytes (/caf%C3%A9)'
    : ''
}

/**
 * A server socket as Node's HTTP server keeps it: `_httpMessage` is the response that has it (the
 * oldest not yet complete), `parser.incoming` the request being read until it has ended.
 */
type ServerSocket = Duplex & {
  _httpMessage?: ServerResponse | null
  parser?: { incoming?: IncomingMessage | null } | null
}

const ANSWERED = Symbol('edgelimit.answered')
type Answered = Duplex & { [ANSWERED]?: number }
// A connection whose refused request waits for the answers before it.
const QUEUED = Symbol('edgelimit.queued')
type Queued = Duplex & { [QUEUED]?: (() => void) | true }

/**
 * A request whose turn has come on a connection whose parser failed while reading it (queued by
 * `answerClientError` behind the answers before it, its body cut short): it can never complete,
 * so it is answered with that failure now, and the connection closes. True if it was.
 *
 * @example if (answerCutShort(req)) return // instead of forwarding it
 */
export function answerCutShort(req: IncomingMessage): boolean {
  const queued: Queued = req.socket
  const pending = queued[QUEUED]
  if (typeof pending !== 'function' || req.complete) return false
  queued[QUEUED] = true
  pending()
  return true
}

/**
 * What a request whose client connection closed under it is counted as: the status
 * `answerClientError` sent on that connection (a 408 for a body too slow, a 400 for one the
 * parser refused), else 499 (the client went away).
 *
 * @example done(goneStatus(req.socket), 'aborted')
 */
export function goneStatus(socket: Duplex | null): number {
  return (socket as Answered | null)?.[ANSWERED] ?? 499
}

/**
 * Answers on a bare connection (no `ServerResponse`: a parser error, a CONNECT) with a problem,
 * then closes it.
 *
 * @example endWithProblem(socket, 405, 'The gateway does not open tunnels (CONNECT).')
 */
export function endWithProblem(socket: Duplex, status: number, detail: string): void {
  const body = JSON.stringify({
    type: 'about:blank',
    title: TITLES[status] ?? STATUS_CODES[status],
    status,
    detail,
  })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/problem+json\r\ncache-control: no-store\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  )
  // A client that does not close its side is not waited for.
  setTimeout(() => socket.destroy(), 1000).unref()
}
