import type { Context, MiddlewareHandler, Next } from 'hono'
import { problemJson } from '../http/problem.js'
import {
  createRateLimitCore,
  type HttpRequest,
  type HttpVerdict,
  pending,
  type RateLimitOptions,
} from '../http/rate-limit.js'
import { draft10List, joinedValue, type NodeResponseLike, setNodeHeaders } from './node-io.js'
import { addFields, bodiless, checkFailure, decodedByFetch, sendFields, sleep, urlPath } from './shared.js'

/** Options of `honoRateLimit`. */
export interface HonoRateLimitOptions extends RateLimitOptions {
  /**
   * The client's socket address. Use the `getConnInfo` helper of your runtime, e.g.
   * `(c) => getConnInfo(c).remote.address` from `hono/bun`, `hono/deno` or `hono/cloudflare-workers`.
   * @default `c.env.incoming.socket.remoteAddress` (`@hono/node-server`)
   */
  peer?: (c: Context) => string | null | undefined
}

interface NodeServerBindings {
  incoming?: { socket?: { remoteAddress?: string } }
  outgoing?: {
    setHeader?: (name: string, value: string) => unknown
    getHeader?: (name: string) => unknown
    headersSent?: boolean
  }
}

const setOnRecord = (fields: Record<string, string | string[]>, name: string, value: string | string[]) => {
  fields[name] = value
}

/** `@hono/node-server` passes the Node request as `c.env.incoming`. */
function nodeServerPeer(c: Context): string | undefined {
  return (c.env as NodeServerBindings | undefined)?.incoming?.socket?.remoteAddress
}

/**
 * Holds a shaped request for `ms`, then goes on, unless its client left meanwhile (the request's
 * signal, which @hono/node-server, Bun and Deno abort when the connection closes): that request
 * is dropped, as the gateway and nginx drop it, with a 499 that reaches no one rather than a
 * handler run for nobody.
 */
async function hold(c: Context, ms: number, go: Next): Promise<Response | undefined> {
  // Read before the hold: Deno aborts only a signal read before the client left.
  const signal = c.req.raw.signal
  await sleep(ms)
  if (signal?.aborted) return c.body(null, 499 as 429)
  await go()
  return undefined
}

/**
 * Rate limiting as Hono middleware: admitted requests get the rate-limit headers on the
 * handler's response; denied ones get the 429/503 answer instead.
 *
 * On `@hono/node-server` the headers of an admitted request go straight onto the Node response
 * (`c.env.outgoing.setHeader`), which the server merges into whatever response the app returns:
 * on the wire as elsewhere, but not in `c.res.headers`, and Hono keeps its fast path (no
 * `Headers` object per request). Other runtimes get them through `c.header`. Used twice on a
 * request's way (`app.use(limit)` and `app.use('/api/*', limit)`), one middleware counts it once.
 *
 * @example
 * const app = new Hono()
 * app.use(honoRateLimit({ limiter }))
 * app.get('/', (c) => c.text('hello'))
 * serve(app) // @hono/node-server
 */
export function honoRateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const core = createRateLimitCore(options, ' peer', problemJson)
  const peer = options.peer ?? nodeServerPeer

  async function after(c: Context, headers: HttpVerdict['headers']): Promise<undefined> {
    // A response the handler built itself (or an error response) did not take them: add them now.
    // Every field is checked: a proxied upstream's response may share some of their values.
    if (headers.every(([name, value]) => c.res.headers.get(name) === value)) return undefined
    const own = c.res.headers
    try {
      addFields(own, headers)
    } catch {
      // Immutable headers (a response from `fetch()`): `c.header` sets them on a copy, without the
      // encoding and length of a body `fetch()` decoded.
      if (decodedByFetch(own)) {
        c.header('content-encoding', undefined)
        c.header('content-length', undefined)
      }
      addFields(own, headers, {
        set: (name, value) => c.header(name, value),
        append: (name, value) => c.header(name, value, { append: true }),
      })
    }
    return undefined
  }

  function apply(c: Context, next: Next, verdict: HttpVerdict): Response | ReturnType<MiddlewareHandler> {
    const outgoing = (c.env as NodeServerBindings | undefined)?.outgoing
    if (verdict.action === 'respond' && verdict.response !== undefined) {
      const { status, headers, body } = verdict.response
      // One string per name, or an array for a name the answer repeats: Hono sends every value.
      // No prototype: a `__proto__` field is a field.
      const fields: Record<string, string | string[]> = Object.create(null)
      sendFields(fields, headers, setOnRecord)
      // The server sends the answer's fields over what is set on the Node response: there, another
      // limiter's draft-10 lists (an app-wide one that admitted it) go in front of ours.
      const getHeader = outgoing?.getHeader
      if (typeof getHeader === 'function')
        for (const name of ['ratelimit-policy', 'ratelimit']) {
          const value = fields[name]
          if (typeof value === 'string' && draft10List(name, value))
            fields[name] = joinedValue(getHeader.call(outgoing, name), value)
        }
      return bodiless(status) ? c.body(null, status as 204, fields) : c.body(body, status as 429, fields)
    }
    const headers = verdict.headers
    if (typeof outgoing?.setHeader === 'function' && outgoing.headersSent !== true) {
      // After another limiter's draft-10 lists, as elsewhere.
      setNodeHeaders(outgoing as NodeResponseLike, headers)
      return verdict.delayMs > 0 ? hold(c, verdict.delayMs, next) : next()
    }
    // Set before the handler runs, the headers join whatever response it builds, which keeps
    // @hono/node-server on its fast path (no Response rebuilt afterwards).
    for (let i = 0; i < headers.length; i++) {
      const h = headers[i] as readonly [string, string]
      c.header(h[0], h[1])
    }
    if (verdict.delayMs > 0) return hold(c, verdict.delayMs, () => next().then(() => after(c, headers)))
    return next().then(() => after(c, headers))
  }

  // Requests this middleware has seen: one it runs on twice (on the app and on a route or sub-app
  // the request reaches) is counted, and its fields set, by the first run only.
  const seen = new WeakSet<Request>()
  return (c, next) => {
    const raw = c.req.raw
    if (seen.has(raw)) return next()
    seen.add(raw)
    try {
      const verdict = core.run(new HonoRequest(c, peer(c) ?? undefined))
      if (pending(verdict))
        return verdict.then(
          (v) => apply(c, next, v),
          (error: unknown) => Promise.reject(checkFailure(error)),
        )
      return Promise.resolve(apply(c, next, verdict))
    } catch (error) {
      return Promise.reject(checkFailure(error))
    }
  }
}

/** A Hono request as the HTTP layer's request (a class: no closure per request). */
class HonoRequest implements HttpRequest {
  readonly #c: Context
  readonly peer: string | undefined
  #path: string | undefined
  constructor(c: Context, peer: string | undefined) {
    this.#c = c
    this.peer = peer
  }
  get method(): string {
    return this.#c.req.method
  }
  /** The path as sent, `%` escapes and all, as every other adapter reads it (`c.req.path` is decoded). */
  get path(): string {
    if (this.#path === undefined) this.#path = urlPath(this.#c.req.url)
    return this.#path
  }
  header(name: string): string | undefined {
    return this.#c.req.header(name)
  }
}
