// `edgelimit/cloudflare`: the Durable Object store and what a Worker needs around it. Imports
// `cloudflare:workers`, so it loads on Workers (workerd, wrangler, miniflare) only.
import type { ClientKeyOptions } from './http/identity.js'
import type { Limiter } from './limiter.js'
import type { WaitUntilContext } from './stores/durable-object/platform.js'

export { durableObjectClass, EdgelimitDurableObject } from './stores/durable-object/object.js'
export type {
  DurableObjectContext,
  DurableObjectIdLike,
  DurableObjectNamespaceLike,
  DurableObjectStorageLike,
  SqlCursor,
  SqlStorage,
  WaitUntilContext,
} from './stores/durable-object/platform.js'
export type { EvaluateRequest, ResetRequest } from './stores/durable-object/protocol.js'
export { type DurableObjectStoreOptions, durableObjectStore } from './stores/durable-object/store.js'

/**
 * Client identity on Cloudflare Workers: the platform sets `CF-Connecting-IP` to the client's
 * address on every request and clients cannot reach a Worker around it, so the header is trusted
 * as is. Pass it as the fetch adapter's `identity` (spread it to add a `secret` or subnet sizes).
 *
 * @example
 * withRateLimit(app, { limiter, identity: { ...cloudflareIdentity, secret: env.KEY_SECRET } })
 */
export const cloudflareIdentity: Readonly<ClientKeyOptions> = Object.freeze({
  header: 'cf-connecting-ip',
  trustPlatform: true,
})

/**
 * The client address as the fetch adapter's `peer` on Workers (`CF-Connecting-IP`), for setups
 * that choose their own `identity` (trusted proxies in front of the Worker, say).
 *
 * @example withRateLimit(app, { limiter, peer: cloudflarePeer, identity: { trustedProxies: [...] } })
 */
export function cloudflarePeer(request: Request): string | undefined {
  return request.headers.get('cf-connecting-ip') ?? undefined
}

/**
 * Wraps a Worker's `fetch` so that work the limiters still hold after a response (approximate
 * rules' pending counts and in-flight syncs) is handed to `ctx.waitUntil`: it runs after the
 * response is sent, without delaying it, and is not lost when the isolate is evicted.
 *
 * @example
 * const handler = withRateLimit(app, { limiter, identity: cloudflareIdentity })
 * export default { fetch: withWaitUntil(handler, limiter) }
 */
export function withWaitUntil<Env, Ctx extends WaitUntilContext>(
  handler: (request: Request, env: Env, ctx: Ctx) => Response | Promise<Response>,
  ...limiters: readonly Limiter[]
): (request: Request, env: Env, ctx: Ctx) => Promise<Response> {
  return async (request, env, ctx) => {
    try {
      return await handler(request, env, ctx)
    } finally {
      for (const limiter of limiters) ctx.waitUntil(limiter.flush())
    }
  }
}
