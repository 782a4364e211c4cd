// A Worker on the Redis store through @upstash/redis (the REST client for edge runtimes), for the
// checks that need workerd's request contexts: a store call belongs to the request that made it.
import { Redis } from '@upstash/redis'
import { createLimiter, fixedWindow } from '../../../src/index.js'
import { redisStore } from '../../../src/redis.js'

interface Env {
  URL: string
  TOKEN: string
}

// One limiter per isolate, as a Worker would have: concurrent requests share its store.
let limiter: ReturnType<typeof createLimiter> | undefined

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    limiter ??= createLimiter({
      rules: [{ name: 'api', algorithm: fixedWindow({ limit: 1000, window: '1d' }) }],
      store: redisStore({
        // The client settings docs/stores/redis.md gives: no retries, a timeout of its own.
        client: new Redis({
          url: env.URL,
          token: env.TOKEN,
          retry: { retries: 0 },
          signal: () => AbortSignal.timeout(3000),
        }),
      }),
      timeout: '2s',
      breaker: false,
      denyCache: false,
    })
    const url = new URL(request.url)
    const key = url.searchParams.get('key') ?? 'k'
    if (url.pathname === '/reset') {
      await limiter.reset(key)
      return Response.json({ reset: true })
    }
    const started = Date.now()
    const d = await limiter.limit(key)
    return Response.json({
      allowed: d.allowed,
      remaining: d.remaining,
      reason: d.reason ?? null,
      ms: Date.now() - started,
    })
  },
}
