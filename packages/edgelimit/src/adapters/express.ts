import { problemJson } from '../http/problem.js'
import { createRateLimitCore, type HttpVerdict, pending, type RateLimitOptions } from '../http/rate-limit.js'
import {
  fromNodeRequest,
  holdNode,
  type NodeRequestLike,
  type NodeResponseLike,
  sendNodeAnswer,
  setNodeHeaders,
} from './node-io.js'
import { checkFailure, pathOf } from './shared.js'

/** The part of Express's `Request` the middleware reads. */
export interface ExpressRequestLike extends NodeRequestLike {
  /** The mount path of the router the middleware runs in (`''` at the top). */
  readonly baseUrl?: string | undefined
  /** The URL as the client sent it, before any rewrite or mount path was stripped. */
  readonly originalUrl?: string | undefined
}

/** Options of `expressRateLimit`: those of every adapter (see `RateLimitOptions`). */
export type ExpressRateLimitOptions = RateLimitOptions

/** An Express middleware (also fits Connect and other `(req, res, next)` servers). */
export type ExpressMiddleware = (
  req: ExpressRequestLike,
  res: NodeResponseLike,
  next: (error?: unknown) => void,
) => void

/**
 * The target Express routes: `req.url` (after any rewrite middleware), under the mount path of a
 * router. There only its path is kept: an absolute-form `req.url` keeps its scheme and host.
 */
function routedUrl(req: ExpressRequestLike): string | undefined {
  const base = req.baseUrl
  return base ? base + pathOf(req.url) : req.url
}

/**
 * Rate limiting as Express middleware: admitted requests get the rate-limit headers and go on;
 * denied ones get the 429/503 answer. Route rules match the full path Express routes: `req.url`
 * after any rewrite middleware, under the router's mount path (on a router mounted at `/auth`,
 * write `/auth/login`); the problem's `instance` is `req.originalUrl`. Errors (a throwing key
 * function, a store failure the limiter does not absorb) go to `next(error)`. The peer is
 * `req.socket.remoteAddress`; Express's `trust proxy` is not used — configure
 * `identity.trustedProxies` instead. With the memory store, `next()` is called before the
 * middleware returns. Used twice on a request's way (`app.use(limit)` and `router.use(limit)`),
 * one middleware counts it once.
 *
 * @example
 * const app = express()
 * app.use(expressRateLimit({ limiter }))
 * app.get('/', (req, res) => res.send('hello'))
 */
export function expressRateLimit(options: ExpressRateLimitOptions): ExpressMiddleware {
  const core = createRateLimitCore(options, '', problemJson)
  // Returns whether to call `next()`; throws what goes to `next(error)`.
  const apply = (res: NodeResponseLike, verdict: HttpVerdict): boolean => {
    if (verdict.action === 'respond' && verdict.response !== undefined) {
      sendNodeAnswer(res, verdict)
      return false
    }
    setNodeHeaders(res, verdict.headers)
    return true
  }
  const later = (res: NodeResponseLike, verdict: HttpVerdict, next: (error?: unknown) => void) => {
    let proceed: boolean
    try {
      proceed = apply(res, verdict)
    } catch (error) {
      next(checkFailure(error))
      return
    }
    if (!proceed) return
    // A held request whose client left meanwhile is dropped: `next` is not called.
    if (verdict.delayMs > 0)
      holdNode(res, verdict.delayMs).then((here) => {
        if (here) next()
      })
    else next()
  }
  // Requests this middleware has seen: one it runs on twice (mounted on the app and on a router
  // the request reaches) is counted, and its fields set, by the first run only.
  const seen = new WeakSet<ExpressRequestLike>()
  return (req, res, next) => {
    if (seen.has(req)) {
      next()
      return
    }
    seen.add(req)
    let verdict: HttpVerdict | Promise<HttpVerdict>
    try {
      verdict = core.run(fromNodeRequest(req, routedUrl(req), req.originalUrl))
    } catch (error) {
      next(checkFailure(error))
      return
    }
    if (pending(verdict))
      verdict.then(
        (v) => later(res, v, next),
        (error: unknown) => next(checkFailure(error)),
      )
    else later(res, verdict, next)
  }
}
