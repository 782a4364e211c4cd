import { createRateLimit, type RateLimitOptions } from '../http/rate-limit.js'
import { fromNodeRequest, type NodeRequestLike } from './node-io.js'
import { pathOf, sleep } from './shared.js'

/** The part of Fastify's `FastifyRequest` the plugin reads. */
export interface FastifyRequestLike {
  readonly url: string
  readonly raw: NodeRequestLike
}

/** The part of Fastify's `FastifyReply` the plugin writes. */
export interface FastifyReplyLike {
  code(status: number): unknown
  header(name: string, value: string): unknown
  send(body: Uint8Array): unknown
}

/** The part of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  addHook(
    name: 'onRequest',
    hook: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>,
  ): unknown
}

const encoder = new TextEncoder()

/** Options of `fastifyRateLimit`: those of every adapter (see `RateLimitOptions`). */
export type FastifyRateLimitOptions = RateLimitOptions

/** The plugin's type: a Fastify async plugin that is not encapsulated. */
export interface FastifyRateLimitPlugin {
  (app: FastifyInstanceLike, options: FastifyRateLimitOptions): Promise<void>
  readonly [key: symbol]: unknown
}

/**
 * Rate limiting as a Fastify plugin: an `onRequest` hook on the instance it is registered on
 * (it skips encapsulation, as `fastify-plugin` would, so it covers the routes of the registering
 * scope). Admitted requests get the rate-limit headers; denied ones get the 429/503 answer. The
 * peer is the socket address; Fastify's `trustProxy` is not used — configure
 * `identity.trustedProxies` instead.
 *
 * @example
 * const app = Fastify()
 * await app.register(fastifyRateLimit, { limiter })
 * app.get('/', async () => 'hello')
 */
export const fastifyRateLimit: FastifyRateLimitPlugin = Object.assign(
  async (app: FastifyInstanceLike, options: FastifyRateLimitOptions): Promise<void> => {
    const limit = createRateLimit(options)
    app.addHook('onRequest', async (request, reply) => {
      const verdict = await limit.check(fromNodeRequest(request.raw, pathOf(request.url)))
      if (verdict.action === 'respond' && verdict.response !== undefined) {
        reply.code(verdict.response.status)
        for (const [name, value] of verdict.response.headers) reply.header(name, value)
        // Bytes, not a string: Fastify would append `; charset=utf-8` to a JSON content type.
        reply.send(encoder.encode(verdict.response.body))
        return reply
      }
      for (const [name, value] of verdict.headers) reply.header(name, value)
      await sleep(verdict.delayMs)
      return undefined
    })
  },
  { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'edgelimit' },
)
