import { createRateLimit, type RateLimitOptions } from '../http/rate-limit.js'
import { applyNodeVerdict, fromNodeRequest, type NodeRequestLike, type NodeResponseLike } from './node-io.js'
import { pathOf } from './shared.js'

/** The part of Express's `Request` the middleware reads. */
export interface ExpressRequestLike extends NodeRequestLike {
  /** The URL before any router stripped its mount path. */
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
 * Rate limiting as Express middleware: admitted requests get the rate-limit headers and go on;
 * denied ones get the 429/503 answer. Errors (a throwing key function, a store failure the
 * limiter does not absorb) go to `next(error)`. The peer is `req.socket.remoteAddress`; Express's `trust proxy` is not
 * used — configure `identity.trustedProxies` instead.
 *
 * @example
 * const app = express()
 * app.use(expressRateLimit({ limiter }))
 * app.get('/', (req, res) => res.send('hello'))
 */
export function expressRateLimit(options: ExpressRateLimitOptions): ExpressMiddleware {
  const limit = createRateLimit(options)
  return (req, res, next) => {
    limit
      .check(fromNodeRequest(req, pathOf(req.originalUrl ?? req.url)))
      .then((verdict) => applyNodeVerdict(res, verdict))
      .then((proceed) => {
        if (proceed) next()
      }, next)
  }
}
