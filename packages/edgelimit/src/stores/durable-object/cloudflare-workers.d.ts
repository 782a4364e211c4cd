// The one runtime import of the Durable Object class. Workers projects get the real declaration
// from `wrangler types` or @cloudflare/workers-types; this stand-in keeps the library free of both.
declare module 'cloudflare:workers' {
  export abstract class DurableObject<Env = unknown> {
    constructor(ctx: unknown, env: Env)
  }
}
