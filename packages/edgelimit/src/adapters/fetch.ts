import {
  after,
  createRateLimitCore,
  type HttpRequest,
  type HttpVerdict,
  type RateLimitOptions,
} from '../http/rate-limit.js'
import { addFields, decodedByFetch, sleep, urlPath } from './shared.js'

/**
 * A Web-standard handler: Cloudflare Workers, Deno, Bun, Vercel Edge, Hono's `app.fetch`… `R` is
 * `Response | undefined` for Bun's WebSocket upgrade (`if (server.upgrade(request)) return`): no
 * response is passed on as none.
 */
export type FetchHandler<Rest extends unknown[], R extends Response | undefined = Response> = (
  request: Request,
  ...rest: Rest
) => R | Promise<R>

/** The direct peer's address, from whatever the runtime passes next to the request. */
export type FetchPeer<Rest extends unknown[]> = (request: Request, ...rest: Rest) => string | null | undefined

/** Options of `withRateLimit`. */
export interface FetchRateLimitOptions<Rest extends unknown[] = unknown[]> extends RateLimitOptions {
  /**
   * The socket address of the client: `denoPeer`, `bunPeer`, or your own. Edge platforms that
   * expose no socket set a header instead; use `identity` with `trustPlatform` there.
   * @default none: the client address comes from `identity` alone
   * @example withRateLimit(handler, { limiter, peer: denoPeer })
   */
  peer?: FetchPeer<Rest>
}

/** Deno's `Deno.serve((request, info) => …)`: the peer is `info.remoteAddr.hostname`. */
export function denoPeer(
  _request: Request,
  info?: { remoteAddr?: { hostname?: string } },
): string | undefined {
  return info?.remoteAddr?.hostname
}

/** Bun's `Bun.serve({ fetch(request, server) {…} })`: the peer is `server.requestIP(request)`. */
export function bunPeer(
  request: Request,
  server?: { requestIP(request: Request): { address: string } | null },
): string | undefined {
  return server?.requestIP(request)?.address
}

/**
 * The handler's response with `headers` added to its own (see `addFields`); a copy when its
 * headers are immutable (e.g. from `fetch()`). It may be a promise, so it goes through
 * `after(response, respond, headers)`: no closure per request.
 */
function respond<R extends Response | undefined>(r: R, headers: readonly (readonly [string, string])[]): R {
  // No response (a Bun WebSocket upgrade): nothing to set. Nor on what is not a Response (a
  // string, say): it goes back as it is, for the runtime to report as it reports any handler's.
  if (!r?.headers) return r
  try {
    addFields(r.headers, headers)
    return r
  } catch {
    // A network error (`Response.error()`, status 0) has no copy: it goes on as it is.
    if (!r.status) return r
    const copy = new Response(r.body, r)
    const own = copy.headers
    // A body `fetch()` decoded: its encoding and length are no longer the body's.
    if (decodedByFetch(own)) {
      own.delete('content-encoding')
      own.delete('content-length')
    }
    addFields(own, headers)
    return copy as R
  }
}

/**
 * Wraps a Web-standard `fetch` handler: the request is checked first; a denied one gets the 429
 * (or 503) answer, an admitted one reaches `handler` (after `delayMs` when shaping) and its
 * response gets the rate-limit headers. Any extra handler arguments (`env`, `info`, `server`) are
 * passed through, and to `peer`.
 *
 * @example
 * // Deno
 * Deno.serve(withRateLimit((req) => new Response('hi'), { limiter, peer: denoPeer }))
 * // Cloudflare Workers
 * export default { fetch: withRateLimit(handler, { limiter, identity: { header: 'cf-connecting-ip', trustPlatform: true } }) }
 */
export function withRateLimit<Rest extends unknown[], R extends Response | undefined = Response>(
  handler: FetchHandler<Rest, R>,
  options: FetchRateLimitOptions<Rest>,
): (request: Request, ...rest: Rest) => Promise<R | Response> {
  const core = createRateLimitCore(options, ' peer')
  const peer = options.peer

  function apply(
    verdict: HttpVerdict,
    request: Request,
    rest: Rest,
    held?: true,
  ): R | Response | Promise<R | Response> {
    const answer = verdict.response
    // Only a `respond` verdict carries one.
    // Its fields are the Response's own, appended: a name it repeats keeps every value.
    // The answer is its own init (its `status` and `headers`; a `body` is no init field). A 204,
    // 205 or 304 from `onLimited` has no content (RFC 9110): sent without its body, as the
    // `Response` constructor throws for one with a body. (`bodiless`, inline: bytes on the edge.)
    if (answer !== undefined)
      return new Response(
        [204, 205, 304].includes(answer.status) ? null : answer.body,
        answer as unknown as ResponseInit,
      )
    // A shaped request reaches the handler once its hold ends, unless its client left meanwhile
    // (its signal aborted): it is dropped, with a 499 that reaches no one, as nginx drops it.
    if (verdict.delayMs > 0 && !held) {
      // Read before the hold: Deno aborts only a signal read before the client left.
      const signal = request.signal
      return sleep(verdict.delayMs).then(() =>
        signal?.aborted ? new Response(null, { status: 499 }) : apply(verdict, request, rest, true),
      )
    }
    return after(handler(request, ...rest), respond<R>, verdict.headers)
  }

  // Async: a throw (from `peer`, or from `handler` when it is called at once) is a rejection. The
  // request as the HTTP layer's: a literal, not a class (bytes on the edge).
  return async (request, ...rest) =>
    after(
      core.run({
        peer: peer?.(request, ...rest) ?? undefined,
        method: request.method,
        path: urlPath(request.url),
        header: (name) => request.headers.get(name),
      } satisfies HttpRequest),
      apply,
      request,
      rest,
    )
}
