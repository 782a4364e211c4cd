import type { IncomingMessage } from 'node:http'
import {
  connectionTokens,
  endsAtGateway,
  fieldValue,
  forwardedPeer,
  isClaim,
  isClaimSpelling,
  sameName,
} from '../proxy/headers.js'
import { hostForm, routeForm } from './path.js'

/** What rules look at in a request: the runtime differences end here. */
export interface RequestInfo {
  readonly method: string
  /** The path, without the query (canonical in the gateway: see `canonicalTarget`). */
  readonly path: string
  /** The path in route form (`routeForm`): what `match.path` globs and `path` keys read. */
  readonly routePath: string
  /** The raw query, without `?`; `''` when there is none. */
  readonly query: string
  /** The Host header (`hostForm`: lower case, no trailing dot), with its port if it has one. */
  readonly host: string
  /**
   * A header by lower-case name; repeated lines read as the first of a single-value field (as Node
   * reads most of them), the lines of a list field joined with `, ` (`Cookie` with `; `): the
   * line the upstream gets (`requestHeaders`).
   * In the gateway, only the headers the upstream gets: hop-by-hop ones, those `Connection` names
   * and `Proxy` are absent, and the forwarding headers (`X-Forwarded-*`, `Forwarded`,
   * `X-Real-IP`, …) read as the gateway sends them: a trusted proxy's as passed on (with the peer
   * appended to `X-Forwarded-For`), anyone else's replaced by the gateway's own.
   */
  header(name: string): string | undefined
  /**
   * A header as the direct peer sent it (hop-by-hop ones absent), before the gateway sets its
   * forwarding headers: what client identity reads, as it decides itself whom to believe. Where
   * absent, `header` is read.
   */
  sent?(name: string): string | undefined
  /** The direct peer (socket) address. */
  readonly peer: string | undefined
}

/** Whether a direct peer is one of our own proxies (`CompiledPolicy.trustsPeer`). */
export type TrustsPeer = (peer: string | undefined) => boolean

const trustsNobody: TrustsPeer = () => false

/** A Node request as the rules see it (a class: one allocation per request, no closures). */
class NodeRequestInfo implements RequestInfo {
  readonly method: string
  readonly path: string
  readonly query: string
  readonly peer: string | undefined
  private readonly raw: readonly string[]
  // `routePath` and `host`, formed at their first read (`undefined` until then): most policies
  // read neither.
  private route: string | undefined
  private hostName: string | undefined
  // The names `Connection` lists, read at the first `header()` (`null` until then).
  private listed: Set<string> | undefined | null = null
  // Whether the peer is trusted, asked at the first forwarding header it sent (`undefined` until then).
  private trusted: boolean | undefined
  constructor(
    private readonly headers: IncomingMessage['headers'],
    req: IncomingMessage,
    private readonly websocket: boolean,
    private readonly trustsPeer: TrustsPeer,
  ) {
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    this.method = req.method ?? 'GET'
    this.path = q === -1 ? url : url.slice(0, q)
    this.query = q === -1 ? '' : url.slice(q + 1)
    this.peer = req.socket.remoteAddress
    this.raw = req.rawHeaders
  }
  get routePath(): string {
    this.route ??= routeForm(this.path)
    return this.route
  }
  get host(): string {
    this.hostName ??= hostForm(this.headers.host)
    return this.hostName
  }
  header(name: string): string | undefined {
    // What the gateway strips before forwarding (`requestHeaders`) is absent here too, so that
    // `Connection: x-api-key` cannot key a request on a header the upstream never sees.
    if (this.stripped(name)) {
      // A forwarding header named in `Connection` is dropped, and the gateway may set its own.
      if (isClaim(name)) return this.forwarding(name, undefined)
      // A WebSocket handshake reaches the upstream with these two put back (see `requestHeaders`).
      if (!this.websocket) return undefined
      return name === 'upgrade' ? 'websocket' : name === 'connection' ? 'Upgrade' : undefined
    }
    // What a client says about itself reaches the upstream only from a trusted proxy, so that
    // `X-Real-IP: <anything>` cannot buy a fresh bucket per request.
    if (isClaim(name)) return this.forwarding(name, this.own(name))
    if (isClaimSpelling(name)) return undefined
    return this.own(name)
  }
  sent(name: string): string | undefined {
    return this.stripped(name) ? undefined : this.own(name)
  }
  /** Whether the gateway drops a header before forwarding, whoever sent it. */
  private stripped(name: string): boolean {
    if (this.listed === null) this.listed = connectionTokens(this.headers.connection)
    return endsAtGateway(name) || this.listed?.has(name) === true
  }
  /** A forwarding header as `requestHeaders` sends it, given the peer's own line (`sent`). */
  private forwarding(name: string, sent: string | undefined): string | undefined {
    if (sent !== undefined) {
      // Asked once, and only of a request that sent a forwarding header the rules read.
      this.trusted ??= this.trustsPeer(this.peer)
      if (!this.trusted) sent = undefined
    }
    if (name === 'x-forwarded-for') {
      const peer = forwardedPeer(this.peer)
      return sent === undefined ? peer : `${sent}, ${peer}`
    }
    if (name === 'x-forwarded-host') return sent ?? this.headers.host
    if (name === 'x-forwarded-proto') return sent ?? 'http'
    return sent
  }
  /** The request's own field, repeated lines as the upstream gets them (`fieldValue`). */
  private own(name: string): string | undefined {
    // Own fields only: `constructor` or `__proto__` would read Object.prototype's members.
    if (!Object.hasOwn(this.headers, name)) return undefined
    const value = this.headers[name]
    if (value === undefined) return undefined
    return typeof value === 'string' ? fieldValue(this.raw, name, value) : value.join(', ')
  }
}

/**
 * Reads a Node request as the rules see it: with `websocket`, a handshake the gateway tunnels
 * (its `Upgrade: websocket` and `Connection: Upgrade` reach the upstream); `trustsPeer` tells
 * whose forwarding headers the gateway passes on (nobody's by default).
 */
export function fromIncoming(
  req: IncomingMessage,
  websocket = false,
  trustsPeer: TrustsPeer = trustsNobody,
): RequestInfo {
  return new NodeRequestInfo(req.headers, req, websocket, trustsPeer)
}

/**
 * How many Host field lines a request has. RFC 9112 §3.2 answers more than one with 400: Node
 * keeps the first for `req.headers.host`, an upstream may read the other.
 */
export function hostLines(raw: readonly string[]): number {
  let n = 0
  for (let i = 0; i < raw.length; i += 2) {
    if (sameName(raw[i] as string, 'host')) n++
  }
  return n
}
