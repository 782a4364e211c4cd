import type { IncomingMessage } from 'node:http'
import { connectionTokens, endsAtGateway } from '../proxy/headers.js'
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
   * A header by lower-case name; repeated lines as Node reads them (the first of a single-value
   * field, the others joined with `, `), which is the line the upstream gets (`requestHeaders`).
   * In the gateway, only the headers the upstream gets: hop-by-hop ones, those `Connection` names
   * and `Proxy` are absent.
   */
  header(name: string): string | undefined
  /** The direct peer (socket) address. */
  readonly peer: string | undefined
}

/** A Node request as the rules see it (a class: one allocation per request, no closures). */
class NodeRequestInfo implements RequestInfo {
  readonly method: string
  readonly path: string
  readonly routePath: string
  readonly query: string
  readonly host: string
  readonly peer: string | undefined
  // The names `Connection` lists, read at the first `header()` (`null` until then).
  private listed: Set<string> | undefined | null = null
  constructor(
    private readonly headers: IncomingMessage['headers'],
    req: IncomingMessage,
    private readonly websocket: boolean,
  ) {
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    this.method = req.method ?? 'GET'
    this.path = q === -1 ? url : url.slice(0, q)
    this.routePath = routeForm(this.path)
    this.query = q === -1 ? '' : url.slice(q + 1)
    this.host = hostForm(headers.host)
    this.peer = req.socket.remoteAddress
  }
  header(name: string): string | undefined {
    // What the gateway strips before forwarding (`requestHeaders`) is absent here too, so that
    // `Connection: x-api-key` cannot key a request on a header the upstream never sees.
    if (this.listed === null) this.listed = connectionTokens(this.headers.connection)
    if (endsAtGateway(name) || this.listed?.has(name) === true) {
      // A WebSocket handshake reaches the upstream with these two put back (see `requestHeaders`).
      if (!this.websocket) return undefined
      return name === 'upgrade' ? 'websocket' : name === 'connection' ? 'Upgrade' : undefined
    }
    // Own fields only: `constructor` or `__proto__` would read Object.prototype's members.
    if (!Object.hasOwn(this.headers, name)) return undefined
    const value = this.headers[name]
    return value === undefined || typeof value === 'string' ? value : value.join(', ')
  }
}

/**
 * Reads a Node request as the rules see it: with `websocket`, a handshake the gateway tunnels
 * (its `Upgrade: websocket` and `Connection: Upgrade` reach the upstream).
 */
export function fromIncoming(req: IncomingMessage, websocket = false): RequestInfo {
  return new NodeRequestInfo(req.headers, req, websocket)
}

/**
 * How many Host field lines a request has. RFC 9112 §3.2 answers more than one with 400: Node
 * keeps the first for `req.headers.host`, an upstream may read the other.
 */
export function hostLines(raw: readonly string[]): number {
  let n = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    if (name.length === 4 && name.toLowerCase() === 'host') n++
  }
  return n
}
