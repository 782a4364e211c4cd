import type { IncomingMessage } from 'node:http'
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
  /** A header by lower-case name; repeated lines joined with `, `. */
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
  constructor(
    private readonly headers: IncomingMessage['headers'],
    req: IncomingMessage,
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
    // Own fields only: `constructor` or `__proto__` would read Object.prototype's members.
    if (!Object.hasOwn(this.headers, name)) return undefined
    const value = this.headers[name]
    return value === undefined || typeof value === 'string' ? value : value.join(', ')
  }
}

/** Reads a Node request as the rules see it. */
export function fromIncoming(req: IncomingMessage): RequestInfo {
  return new NodeRequestInfo(req.headers, req)
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
