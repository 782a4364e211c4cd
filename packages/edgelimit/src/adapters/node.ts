import { problemJson } from '../http/problem.js'
import { createRateLimitCore, type RateLimitOptions } from '../http/rate-limit.js'
import { limitNode, type NodeRequestLike, type NodeResponseLike } from './node-io.js'

export type { NodeRequestLike, NodeResponseLike } from './node-io.js'

/** Options of `nodeRateLimit`: those of every adapter (see `RateLimitOptions`). */
export type NodeRateLimitOptions = RateLimitOptions

/**
 * Rate limiting for `node:http` (and anything built on it). The returned function sets the
 * rate-limit headers and resolves `true` when the request may go on, or writes the 429/503
 * answer and resolves `false` (`false` too for a request held for a shaping delay whose client
 * left meanwhile: drop it). The peer is `req.socket.remoteAddress`. With the memory store and a
 * client seen before, the headers are set before it returns (only the boolean waits for the
 * promise); a new client's address is first hashed into its key asynchronously.
 *
 * @example
 * const limit = nodeRateLimit({ limiter })
 * createServer(async (req, res) => {
 *   if (!(await limit(req, res))) return
 *   res.end('hello')
 * }).listen(3000)
 */
export function nodeRateLimit(
  options: NodeRateLimitOptions,
): (req: NodeRequestLike, res: NodeResponseLike) => Promise<boolean> {
  const core = createRateLimitCore(options, '', problemJson)
  return (req, res) => limitNode(core, req, res)
}
