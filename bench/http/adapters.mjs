/**
 * The rows of `npm run bench:http` and `npm run bench:http:instructions`: every adapter, and the
 * control row under each framework (its two draft-10 fields set by hand, no edgelimit). The names
 * are those bench/http/server.mjs serves.
 */
export const ADAPTERS = {
  node: { label: 'Node http', api: 'nodeRateLimit(options)(req, res)' },
  express: { label: 'Express', api: 'app.use(expressRateLimit(options))' },
  fastify: { label: 'Fastify', api: 'app.register(fastifyRateLimit, options)' },
  hono: { label: 'Hono (@hono/node-server)', api: 'app.use(honoRateLimit(options))' },
  fetch: { label: 'fetch wrapper (node:http bridge)', api: 'withRateLimit(handler, { ...options, peer })' },
  // Not an adapter: what Node itself charges for the fields any adapter must send (scenario admit).
  fields: {
    label: 'control: Node http, the two draft-10 fields set by hand (no edgelimit)',
    api: `res.setHeader('ratelimit-policy', …); res.setHeader('ratelimit', '"api";r=<remaining>;t=<seconds>')`,
    control: true,
  },
  'express-fields': {
    label: 'control: Express, a middleware setting the two fields by hand (no edgelimit)',
    api: 'app.use((req, res, next) => { res.setHeader(…) ×2; next() })',
    control: true,
  },
  'fastify-fields': {
    label: 'control: Fastify, an onRequest hook setting the two fields by hand (no edgelimit)',
    api: "app.addHook('onRequest', (request, reply, done) => { reply.header(…) ×2; done() })",
    control: true,
  },
  'hono-fields': {
    label: 'control: Hono, a middleware setting the two fields by hand (no edgelimit)',
    api: 'app.use((c, next) => { c.env.outgoing.setHeader(…) ×2; return next() }) (the way honoRateLimit sets them on @hono/node-server)',
    control: true,
  },
}

/** Each framework's control row (the fetch wrapper has none). */
export const CONTROL_OF = {
  node: 'fields',
  express: 'express-fields',
  fastify: 'fastify-fields',
  hono: 'hono-fields',
}
