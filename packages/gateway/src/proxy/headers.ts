import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { TOKEN } from '../config/header-name.js'
import { mergeRateLimitFields } from './ratelimit-fields.js'

// Which headers cross the gateway, each way: hop-by-hop ones end here, client claims need trust.

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
/**
 * Single-value request fields (not lists: RFC 9110 §5.3 lets a recipient join the lines of a list
 * field only) that Node joins with `, ` all the same in `req.headers`: joined, two `Range` lines
 * would ask for both ranges and two `Date` lines make no date. Of these, the rules read
 * (`fromIncoming`) and the upstream gets the first line, as Node keeps it of FIRST_LINE's others.
 */
const JOINED_SINGLE_VALUE = new Set([
  'range',
  'if-range',
  'date',
  'content-range',
  'content-location',
  'origin',
  'access-control-request-method',
  'sec-websocket-key',
])
/**
 * The request fields sent at their first line only, each with a bit of its own (which of them have
 * been sent, in a number: nothing allocated per request): those Node keeps the first line of in
 * `req.headers`, and JOINED_SINGLE_VALUE. Node joins the others' lines (`Cookie` with `; `, the
 * rest with `, `). `Host` and `Content-Length` are not here: two lines of either are answered 400
 * before this.
 */
const FIRST_LINE = new Map(
  [
    'authorization',
    'content-type',
    'user-agent',
    'referer',
    'from',
    'if-modified-since',
    'if-unmodified-since',
    'max-forwards',
    'age',
    'etag',
    'expires',
    'last-modified',
    'location',
    'retry-after',
    'server',
    ...JOINED_SINGLE_VALUE,
  ].map((name, i) => [name, 1 << i]),
)

/**
 * A request field as the rules read it, given its value in `req.headers` (`read`) and the raw lines:
 * `read`, but the first line of a single-value field Node joins (JOINED_SINGLE_VALUE).
 *
 * @example fieldValue(['Range', 'bytes=0-1', 'Range', 'bytes=5-6'], 'range', 'bytes=0-1, bytes=5-6') // 'bytes=0-1'
 */
export function fieldValue(raw: readonly string[], lower: string, read: string): string {
  // Without a comma, `read` is one line; else the lines are looked at (only for these fields).
  if (!JOINED_SINGLE_VALUE.has(lower) || !read.includes(',')) return read
  for (let i = 0; i < raw.length; i += 2) {
    if (sameName(raw[i] as string, lower)) return raw[i + 1] as string
  }
  return read
}

/** Whether a header name is `lower` (a lower-case name), whatever its case; allocates nothing. */
export function sameName(name: string, lower: string): boolean {
  if (name.length !== lower.length) return false
  // Header names are tokens (ASCII): folding A-Z is their whole case-insensitivity.
  for (let k = 0; k < name.length; k++) {
    const c = name.charCodeAt(k)
    if ((c >= 65 && c <= 90 ? c + 32 : c) !== lower.charCodeAt(k)) return false
  }
  return true
}
/** Whether a lower-case header name is one of the client claims above. */
export function isClaim(lower: string): boolean {
  return CLIENT_CLAIMS.has(lower) || lower.startsWith('x-forwarded-')
}
/** Whether a lower-case header name is a client claim spelled with `_` for `-`: dropped from everyone. */
export function isClaimSpelling(lower: string): boolean {
  return lower.includes('_') && isClaim(lower.replaceAll('_', '-'))
}
// RFC 9112 §4: a reason phrase relayed as is only when made of tab, space and visible ASCII.
const REASON = /^[\t\x20-\x7e]*$/

/**
 * An upstream's reason phrase as it can be relayed: itself when Node will send it (tab, space
 * and visible ASCII), else `undefined` (undici decodes it as UTF-8, and Node refuses anything
 * beyond; a client may ignore the phrase anyway).
 *
 * @example relayedReason('Não Encontrado') // undefined: the standard phrase goes instead
 */
export function relayedReason(phrase: string | undefined): string | undefined {
  return phrase && REASON.test(phrase) ? phrase : undefined
}

/** Writes a relayed answer's head, with the upstream's reason phrase when it can be relayed. */
export function writeRelayedHead(
  res: ServerResponse,
  status: number,
  phrase: string | undefined,
  headers: OutgoingHttpHeaders,
): void {
  const reason = relayedReason(phrase)
  if (reason === undefined) res.writeHead(status, headers)
  else res.writeHead(status, reason, headers)
}

/**
 * Whether a request header (lower-case name) never reaches the upstream, whatever `Connection`
 * says: hop-by-hop, or `Proxy` (httpoxy: a CGI-style upstream would read it as HTTP_PROXY).
 */
export function endsAtGateway(lower: string): boolean {
  return HOP_BY_HOP.has(lower) || lower === 'proxy'
}

/**
 * Names listed in a Connection header, which are hop-by-hop too; `undefined` when there are none
 * (the usual `keep-alive` or `close`, in any case, costs no allocation). `host` is never one: the
 * gateway sets the Host the upstream gets (`preserveHost`), and the rules read it.
 */
export function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined) return undefined
  const usual = typeof value === 'string' && (sameName(value, 'keep-alive') || sameName(value, 'close'))
  if (usual) return undefined
  const text = Array.isArray(value) ? value.join(',') : value
  const tokens = text
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '' && t !== 'close' && t !== 'keep-alive' && t !== 'host')
  return tokens.length === 0 ? undefined : new Set(tokens)
}

/**
 * The client's socket address as the gateway writes it into `X-Forwarded-For`; IPv4-mapped IPv6
 * shown as IPv4.
 */
export function forwardedPeer(address: string | undefined): string {
  const peer = address ?? 'unknown'
  return peer.startsWith('::ffff:') && peer.includes('.') ? peer.slice(7) : peer
}

/**
 * The request's header lines for the upstream: hop-by-hop and `Proxy` removed, X-Forwarded-*
 * added; with `upgrade` (a tunnel's protocol), `Connection: Upgrade` and that `Upgrade` put back.
 * A field sent on several lines goes as one, the value the rules read (`fromIncoming`): the first
 * line of a single-value field (`FIRST_LINE`), the lines joined for the others (list fields, RFC
 * 9110 §5.3), so that an upstream reading the last line cannot see another value than the rules.
 */
export function requestHeaders(
  req: IncomingMessage,
  preserveHost: boolean,
  trusted: boolean,
  upgrade?: string,
): string[] {
  const raw = req.rawHeaders
  const headers = req.headers
  const listed = connectionTokens(headers.connection)
  const out: string[] = []
  let forwardedFor: string | undefined
  let forwardedHost = false
  let forwardedProto = false
  // Which fields have been sent: FIRST_LINE's by bit, the joined ones by name.
  let firstLines = 0
  let joined: Set<string> | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    let value = raw[i + 1] as string
    const lower = name.toLowerCase()
    // What is dropped here is what `fromIncoming` hides from the rules.
    if (endsAtGateway(lower) || listed?.has(lower)) continue
    if (lower === 'host' && !preserveHost) continue
    if (!trusted && isClaim(lower)) continue
    // CGI, WSGI and Rack read `X_Forwarded_For` as HTTP_X_FORWARDED_FOR, the same variable as
    // X-Forwarded-For (cf. Puma CVE-2024-45614): no proxy sends that spelling, so it is dropped
    // even from a trusted one. Other names with `_` pass (nginx would drop them all by default).
    if (isClaimSpelling(lower)) continue
    if (lower === 'x-forwarded-for') {
      forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`
      continue
    }
    // A field on several lines is sent once, at its first line, as the rules read it: that line
    // (FIRST_LINE), or the lines joined. `__proto__` is no own field (not a string here) and
    // `Set-Cookie` an array: their lines pass as they are.
    const read = headers[lower]
    if (typeof read === 'string') {
      const bit = FIRST_LINE.get(lower)
      if (bit !== undefined) {
        if ((firstLines & bit) !== 0) continue
        firstLines |= bit
      } else if (read !== value) {
        // Not the field's value as read, so one of several lines joined: a set only then.
        if (joined?.has(lower)) continue
        joined ??= new Set()
        joined.add(lower)
        value = read
      }
    }
    if (lower === 'x-forwarded-host') forwardedHost = true
    else if (lower === 'x-forwarded-proto') forwardedProto = true
    out.push(name, value)
  }
  // What is added here is what `fromIncoming` shows the rules (`NodeRequestInfo.forwarding`).
  const peer = forwardedPeer(req.socket.remoteAddress)
  out.push('x-forwarded-for', forwardedFor === undefined ? peer : `${forwardedFor}, ${peer}`)
  if (!forwardedHost && req.headers.host !== undefined) out.push('x-forwarded-host', req.headers.host)
  if (!forwardedProto) out.push('x-forwarded-proto', 'http')
  if (upgrade !== undefined) out.push('connection', 'Upgrade', 'upgrade', upgrade)
  return out
}

/**
 * The upstream's response headers for the client: hop-by-hop removed, the gateway's rate-limit
 * fields (`extra`, lower-case names) added — combined with the upstream's own, when it sent
 * any, so that they are not made to look more permissive (see `mergeRateLimitFields`).
 */
export function responseHeaders(
  headers: IncomingHttpHeaders,
  extra: readonly (readonly [string, string])[],
): OutgoingHttpHeaders {
  const listed = connectionTokens(headers.connection)
  const out: OutgoingHttpHeaders = {}
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || listed?.has(name)) continue
    out[name] = headers[name]
  }
  for (const [name] of extra) {
    if (out[name] === undefined) continue
    mergeRateLimitFields(out, extra)
    return out
  }
  for (const [name, value] of extra) out[name] = value
  return out
}

/**
 * Trailer fields that say how to frame or read the content (RFC 9110 §6.5.1): not relayed, so
 * that a client merging trailers into the head cannot be told another type or coding after the fact.
 */
const NOT_A_TRAILER = new Set(['content-length', 'content-type', 'content-encoding', 'content-range', 'host'])
// What Node's `addTrailers` takes (RFC 9110 §5.1 tokens: TOKEN, §5.5 field values); it throws on the rest.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/**
 * The upstream's trailer fields as the client gets them (`res.addTrailers`): hop-by-hop ones and
 * those in NOT_A_TRAILER dropped, each line of a repeated field kept.
 *
 * @example responseTrailers({ 'x-checksum': 'abc', 'content-type': 'text/html' }) // [['x-checksum', 'abc']]
 */
export function responseTrailers(trailers: IncomingHttpHeaders): [string, string][] {
  const out: [string, string][] = []
  for (const name in trailers) {
    if (HOP_BY_HOP.has(name) || NOT_A_TRAILER.has(name) || !TOKEN.test(name)) continue
    const value = trailers[name]
    for (const line of Array.isArray(value) ? value : [value ?? '']) {
      if (FIELD_VALUE.test(line)) out.push([name, line])
    }
  }
  return out
}
