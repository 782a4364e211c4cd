import { type HttpRequest, type HttpVerdict, pending, type RateLimitCore } from '../http/rate-limit.js'
import { bodiless, pathOf, sendFields, sleep } from './shared.js'

/** The part of Node's `IncomingMessage` the adapter reads (Express and Fastify's `raw` fit too). */
export interface NodeRequestLike {
  readonly method?: string | undefined
  readonly url?: string | undefined
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>
  readonly socket?: { readonly remoteAddress?: string | undefined } | null | undefined
}

/**
 * The part of Node's `ServerResponse` the adapter writes (HTTP/2's `Http2ServerResponse` fits too:
 * `end` is always given the body, so its overloads match).
 */
export interface NodeResponseLike {
  statusCode: number
  /** `true` once the head was sent (an earlier middleware's `res.flushHeaders()`): too late for fields. */
  readonly headersSent?: boolean | undefined
  /** `true` once the connection is gone (the client left): a held request is then dropped. */
  readonly destroyed?: boolean | undefined
  /** HTTP/2 compatibility: the stream, `destroyed` once the client reset it or left. */
  readonly stream?: { readonly destroyed?: boolean | undefined } | undefined
  setHeader(name: string, value: string | string[]): unknown
  /** A field set already (another limiter's draft-10 list, to add ours to). */
  getHeader?(name: string): unknown
  end(body: string): unknown
}

/**
 * A Node request as the HTTP layer's request; repeated header lines are joined with `, `. A class,
 * not an object literal with a closure: one small allocation per request, and the path is cut
 * from the URL only when something reads it (routes, a denial, a callback).
 */
class NodeHttpRequest implements HttpRequest {
  readonly method: string
  readonly peer: string | undefined
  #path: string | undefined
  readonly #req: NodeRequestLike
  readonly #target: string | undefined
  readonly #original: string | undefined

  constructor(req: NodeRequestLike, target: string | undefined, original: string | undefined) {
    this.#req = req
    this.#target = target
    this.#original = original
    this.method = req.method ?? 'GET'
    this.peer = req.socket?.remoteAddress
  }

  get path(): string {
    if (this.#path === undefined) this.#path = pathOf(this.#target)
    return this.#path
  }

  get instance(): string {
    return this.#original === undefined ? this.path : pathOf(this.#original)
  }

  header(name: string): string | undefined {
    const value = this.#req.headers[name.toLowerCase()]
    return typeof value === 'string' || value === undefined ? value : value.join(', ')
  }
}

/**
 * Reads a Node request as the HTTP layer's request. `target` is the request target the path is
 * taken from, the one the framework routes (`req.url` unless given); `original` is the one the
 * client sent, when that is another (for the problem's `instance`).
 */
export function fromNodeRequest(
  req: NodeRequestLike,
  target: string | undefined = req.url,
  original?: string,
): HttpRequest {
  return new NodeHttpRequest(req, target, original)
}

/**
 * The value to set for a field that may be set already: a draft-10 list (`"name";…`) goes after
 * the draft-10 list of another limiter that ran before on the request (an app-wide one before a
 * route's), so that the client is told of both policies, as the fetch and Hono adapters tell it
 * (draft-10 §7.2: not only of the more permissive); any other value replaces what was there.
 */
export function joinedValue(had: unknown, value: string): string {
  return typeof had === 'string' && had[0] === '"' && had !== value ? `${had}, ${value}` : value
}

/** Whether a field (its name in lower case) is a draft-10 list: `RateLimit` or `RateLimit-Policy` as `"name";…`. */
export function draft10List(name: string, value: string): boolean {
  return value[0] === '"' && (name === 'ratelimit' || name === 'ratelimit-policy')
}

/** Sets a field, after another limiter's draft-10 list when there is one (`joinedValue`). */
function setField(res: NodeResponseLike, name: string, value: string): void {
  // Only a draft-10 list is looked up: other fields replace, with no `getHeader`.
  res.setHeader(name, draft10List(name, value) ? joinedValue(res.getHeader?.(name), value) : value)
}

/**
 * Sets the verdict's rate-limit headers, one `setHeader` each (Node has no cheaper public call).
 * None once the head was sent (an earlier middleware streams): the request goes on without them,
 * as in Fastify and Hono, rather than failing on `ERR_HTTP_HEADERS_SENT`.
 */
export function setNodeHeaders(res: NodeResponseLike, headers: HttpVerdict['headers']): void {
  if (res.headersSent) return
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i] as readonly [string, string]
    setField(res, h[0], h[1])
  }
}

/** Writes a 429/503 answer; a name it repeats (two `set-cookie`) is sent with every value. */
export function sendNodeAnswer(res: NodeResponseLike, verdict: HttpVerdict): void {
  const answer = verdict.response as NonNullable<HttpVerdict['response']>
  // The fields first: one Node refuses fails the denial before its status is set.
  sendFields(res, answer.headers, setOnResponse)
  res.statusCode = answer.status
  res.end(bodiless(answer.status) ? '' : answer.body)
}

const setOnResponse = (res: NodeResponseLike, name: string, value: string | string[]) =>
  typeof value === 'string' ? setField(res, name, value) : res.setHeader(name, value)

const PROCEED: Promise<boolean> = Promise.resolve(true)
const ANSWERED: Promise<boolean> = Promise.resolve(false)

/**
 * Holds a shaped request for `ms`; resolves whether its client is still there. One that left
 * meanwhile is dropped, as the gateway and nginx drop it: its handler would answer no one, and
 * its turn in the queue (already charged) would do work for nobody.
 */
export function holdNode(res: Pick<NodeResponseLike, 'destroyed' | 'stream'>, ms: number): Promise<boolean> {
  return sleep(ms).then(() => !(res.destroyed || res.stream?.destroyed))
}

/**
 * Applies a verdict to a Node response: the rate-limit headers, or the whole 429/503 answer.
 * Resolves `true` when the request may go on (after the shaping delay), `false` once answered
 * or when the client left while the request was held.
 */
export function applyNodeVerdict(res: NodeResponseLike, verdict: HttpVerdict): Promise<boolean> {
  if (verdict.action === 'respond' && verdict.response !== undefined) {
    sendNodeAnswer(res, verdict)
    return ANSWERED
  }
  setNodeHeaders(res, verdict.headers)
  return verdict.delayMs > 0 ? holdNode(res, verdict.delayMs) : PROCEED
}

/**
 * Checks a Node request and applies the verdict: synchronously when the HTTP layer answers
 * synchronously (the memory store, a known client), else through one promise.
 */
export function limitNode(
  core: RateLimitCore,
  req: NodeRequestLike,
  res: NodeResponseLike,
  target?: string,
): Promise<boolean> {
  try {
    const verdict = core.run(fromNodeRequest(req, target ?? req.url))
    if (pending(verdict)) return verdict.then((v) => applyNodeVerdict(res, v))
    return applyNodeVerdict(res, verdict)
  } catch (error) {
    // A denial after the head was sent, say: a rejection, as from an async function.
    return Promise.reject(error)
  }
}
