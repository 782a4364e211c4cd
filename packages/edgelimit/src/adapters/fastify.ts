import { problemJson } from '../http/problem.js'
import { createRateLimitCore, type HttpVerdict, pending, type RateLimitOptions } from '../http/rate-limit.js'
import { draft10List, fromNodeRequest, holdNode, joinedValue, type NodeRequestLike } from './node-io.js'
import { bodiless, checkFailure, lowerName, sendFields } from './shared.js'

/** The part of Fastify's `FastifyRequest` the plugin reads. */
export interface FastifyRequestLike {
  readonly url: string
  /** `originalUrl`: the URL as sent, which Fastify keeps there when its `rewriteUrl` changed `url`. */
  readonly raw: NodeRequestLike & { readonly originalUrl?: string | undefined }
}

/** The part of Fastify's `FastifyReply` the plugin writes. */
export interface FastifyReplyLike {
  code(status: number): unknown
  header(name: string, value: string | string[]): unknown
  getHeader(name: string): unknown
  send(body?: Uint8Array): unknown
  hijack(): unknown
  readonly raw: {
    readonly headersSent: boolean
    readonly destroyed?: boolean | undefined
    setHeader(name: string, value: never): unknown
  }
}

/** The part of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  addHook(
    name: 'onRequest',
    hook: (request: FastifyRequestLike, reply: FastifyReplyLike, done: (error?: Error) => void) => void,
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

// A route that takes the response over (`reply.hijack()`, then `reply.raw`) skips what
// `reply.header()` set: its hijack first copies our fields to `reply.raw`, with the values the
// reply holds then (a route's own `reply.header()` or `removeHeader()` still counts). Normal
// responses are untouched: `reply.raw` headers would put every header through Node's slower path.
// The copy never breaks the route's hijack: none once the route sent the head itself (an SSE
// stream that writes, then hijacks), and a value Node refuses is left out.
// A draft-10 list goes after one an earlier limiter's hook set on the reply (`joinedValue`).
const setOnReply = (reply: FastifyReplyLike, name: string, value: string | string[]) =>
  reply.header(
    name,
    typeof value === 'string' && draft10List(name, value) ? joinedValue(reply.getHeader(name), value) : value,
  )

function keepOnHijack(reply: FastifyReplyLike, headers: HttpVerdict['headers']): void {
  const hijack = reply.hijack
  reply.hijack = () => {
    // A route that sent the head before its hijack: too late for the fields.
    if (reply.raw.headersSent) return hijack.call(reply)
    for (const [name] of headers) {
      const value = reply.getHeader(lowerName(name))
      if (value === undefined) continue
      try {
        reply.raw.setHeader(lowerName(name), value as never)
      } catch {
        // Not ours to fail: the route set the value (`reply.header()`), and it goes without it.
      }
    }
    return hijack.call(reply)
  }
}

/**
 * Rate limiting as a Fastify plugin: an `onRequest` hook on the instance it is registered on
 * (it skips encapsulation, as `fastify-plugin` would, so it covers the routes of the registering
 * scope). Admitted requests get the rate-limit headers; denied ones get the 429/503 answer. Routes
 * match the full path up to the first `;` (`useSemicolonDelimiter` routes `/login;x` to `/login`,
 * so a `/login` rule counts it with or without the option). A route that hijacks the reply
 * (`reply.hijack()`, then `reply.raw`) still sends the fields (not one that sent the head before
 * its hijack: too late, and its hijack goes on as without the plugin). Under Fastify's `rewriteUrl`,
 * routes match the rewritten URL (the one Fastify routes), and the problem's `instance` is the one
 * sent. The peer is the socket address;
 * Fastify's `trustProxy` is not used — configure `identity.trustedProxies` instead.
 *
 * @example
 * const app = Fastify()
 * await app.register(fastifyRateLimit, { limiter })
 * app.get('/', async () => 'hello')
 */
export const fastifyRateLimit: FastifyRateLimitPlugin = Object.assign(
  async (app: FastifyInstanceLike, options: FastifyRateLimitOptions): Promise<void> => {
    const core = createRateLimitCore(options, ' prefix logLevel logSerializers', problemJson)
    // A callback hook, not an async one: with the memory store, no promise per request.
    const apply = (reply: FastifyReplyLike, verdict: HttpVerdict, done: (error?: Error) => void) => {
      try {
        if (verdict.action === 'respond' && verdict.response !== undefined) {
          const answer = verdict.response
          // A name the answer repeats (two `set-cookie`) is sent with every value. The fields
          // first: one HTTP cannot carry fails the denial before its status is set.
          sendFields(reply, answer.headers, setOnReply)
          reply.code(answer.status)
          // Bytes, not a string: Fastify would append `; charset=utf-8` to a JSON content type.
          // Answered from the hook: `done` is not called.
          reply.send(bodiless(answer.status) ? undefined : encoder.encode(answer.body))
          return
        }
        const headers = verdict.headers
        for (let i = 0; i < headers.length; i++) {
          const h = headers[i] as readonly [string, string]
          setOnReply(reply, lowerName(h[0]), h[1])
        }
        if (headers.length > 0) keepOnHijack(reply, headers)
      } catch (error) {
        done(checkFailure(error))
        return
      }
      // A held request whose client left meanwhile is dropped: Fastify's lifecycle already ended
      // with the connection, and `done` is not called, so the route does not run for no one.
      if (verdict.delayMs > 0)
        holdNode(reply.raw, verdict.delayMs).then((here) => {
          if (here) done()
        })
      else done()
    }
    app.addHook('onRequest', (request, reply, done) => {
      const url = request.url
      // Routes match the URL Fastify routes, after its `rewriteUrl`; the problem names the one sent.
      const sent = request.raw.originalUrl
      // With `useSemicolonDelimiter` (Fastify 4's default) `/login;x` is routed to `/login`; routes
      // match the path before any `;` whatever the option, as matching more is the safe side.
      const semicolon = url.indexOf(';')
      const verdict = core.run(
        semicolon < 0 && sent === undefined
          ? fromNodeRequest(request.raw, url)
          : fromNodeRequest(request.raw, semicolon < 0 ? url : url.slice(0, semicolon), sent ?? url),
      )
      if (pending(verdict))
        verdict.then(
          (v) => apply(reply, v, done),
          (error: unknown) => done(checkFailure(error)),
        )
      else apply(reply, verdict, done)
    })
  },
  { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'edgelimit' },
)
