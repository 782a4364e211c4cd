import type { Context, MiddlewareHandler } from 'hono'
import { createRateLimit, type RateLimitOptions } from '../http/rate-limit.js'
import { sleep } from './shared.js'

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
}

/** `@hono/node-server` passes the Node request as `c.env.incoming`. */
function nodeServerPeer(c: Context): string | undefined {
  return (c.env as NodeServerBindings | undefined)?.incoming?.socket?.remoteAddress
}

/**
 * Rate limiting as Hono middleware: admitted requests get the rate-limit headers on the
 * handler's response; denied ones get the 429/503 answer instead.
 *
 * @example
 * const app = new Hono()
 * app.use(honoRateLimit({ limiter }))
 * app.get('/', (c) => c.text('hello'))
 * serve(app) // @hono/node-server
 */
export function honoRateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const limit = createRateLimit(options)
  const peer = options.peer ?? nodeServerPeer
  return async (c, next) => {
    const verdict = await limit.check({
      method: c.req.method,
      path: c.req.path,
      header: (name) => c.req.header(name),
      peer: peer(c) ?? undefined,
    })
    if (verdict.action === 'respond' && verdict.response !== undefined) {
      const { status, headers, body } = verdict.response
      return c.body(body, status as 429, Object.fromEntries(headers))
    }
    // Set before the handler runs, the headers join whatever response it builds, which keeps
    // @hono/node-server on its fast path (no Response rebuilt afterwards).
    for (const [name, value] of verdict.headers) c.header(name, value)
    if (verdict.delayMs > 0) await sleep(verdict.delayMs)
    await next()
    const first = verdict.headers[0]
    if (first === undefined || c.res.headers.get(first[0]) === first[1]) return undefined
    // A response the handler built itself (or an error response) did not take them: add them now.
    try {
      for (const [name, value] of verdict.headers) c.res.headers.set(name, value)
    } catch {
      // Immutable headers (a response from `fetch()`): `c.header` sets them on a copy.
      for (const [name, value] of verdict.headers) c.header(name, value)
    }
    return undefined
  }
}
