// The Worker behind `npm run bench:edge`, run in workerd by miniflare. Decisions go through the
// limiter and the Durable Object store exactly as in the example Worker; `BareCounter` is the
// ceiling: one RPC to a Durable Object that adds 1 in memory and writes it through ctx.storage.sql,
// the least a durable per-key counter can do.
import { DurableObject } from 'cloudflare:workers'
import {
  type DurableObjectContext,
  type DurableObjectNamespaceLike,
  durableObjectStore,
} from '../../packages/edgelimit/src/cloudflare.js'
import { createLimiter, type Limiter, slidingWindow } from '../../packages/edgelimit/src/index.js'

export { EdgelimitDurableObject } from '../../packages/edgelimit/src/cloudflare.js'

/** The ceiling: a durable counter per key, nothing else. */
export class BareCounter extends DurableObject {
  readonly #counts = new Map<string, number>()
  readonly #sql: DurableObjectContext['storage']['sql']

  constructor(ctx: DurableObjectContext, env: unknown) {
    super(ctx, env)
    this.#sql = ctx.storage.sql
    this.#sql.exec('CREATE TABLE IF NOT EXISTS counts (key TEXT PRIMARY KEY, n INTEGER NOT NULL)')
  }

  increment(key: string): number {
    const n = (this.#counts.get(key) ?? 0) + 1
    this.#counts.set(key, n)
    this.#sql.exec('INSERT OR REPLACE INTO counts (key, n) VALUES (?, ?)', key, n)
    return n
  }
}

interface Env {
  LIMITER: DurableObjectNamespaceLike
  COUNTER: DurableObjectNamespaceLike
}

/** A case: how one decision for key `i` is made. */
type Decide = (i: number) => Promise<boolean>

const limiters = new Map<string, Limiter>()

function limiterFor(env: Env, shards: number | undefined): Limiter {
  const id = String(shards)
  let limiter = limiters.get(id)
  if (limiter === undefined) {
    limiter = createLimiter({
      // Large enough that every decision is an admission that writes state.
      rules: [{ name: 'api', algorithm: slidingWindow({ limit: 500_000_000, window: '1h' }) }],
      store: durableObjectStore({ namespace: env.LIMITER, ...(shards === undefined ? {} : { shards }) }),
      timeout: '1s',
    })
    limiters.set(id, limiter)
  }
  return limiter
}

function decider(env: Env, mode: string, keys: number, run: string): Decide {
  const key = (i: number) => (keys === 1 ? `${run}:hot` : `${run}:k${i % keys}`)
  switch (mode) {
    case 'edgelimit':
      return async (i) => (await limiterFor(env, undefined).limit(key(i))).allowed
    case 'edgelimit-sharded':
      return async (i) => (await limiterFor(env, 16).limit(key(i))).allowed
    case 'bare':
      return async (i) => {
        const k = key(i)
        const stub = env.COUNTER.get(env.COUNTER.idFromName(k)) as unknown as {
          increment(key: string): Promise<number>
        }
        return (await stub.increment(k)) > 0
      }
    case 'noop':
      return async () => true
    default:
      throw new Error(`unknown mode ${mode}`)
  }
}

/** `n` decisions, `concurrency` in flight, keys visited round-robin from `from`; timed inside workerd. */
async function batch(decide: Decide, from: number, n: number, concurrency: number) {
  let next = 0
  let admitted = 0
  const started = Date.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = from + next++
        if (await decide(i)) admitted++
      }
    }),
  )
  return { ms: Date.now() - started, admitted }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url)
    const q = (name: string) => url.searchParams.get(name) ?? ''
    const decide = decider(env, q('mode'), Number(q('keys')), q('run'))
    if (url.pathname === '/one') return new Response((await decide(Number(q('i')))) ? '1' : '0')
    if (url.pathname === '/batch') {
      return Response.json(await batch(decide, Number(q('from')), Number(q('n')), Number(q('concurrency'))))
    }
    return new Response('not found', { status: 404 })
  },
}
