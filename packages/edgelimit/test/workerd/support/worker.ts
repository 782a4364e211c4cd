// The test Worker: runs the library from source inside workerd, with the Durable Object store
// bound to `LIMITER`. Each route runs one kind of check and answers JSON for the vitest side.
import type { AlgorithmSpec } from '../../../src/algorithms.js'
import {
  type DurableObjectNamespaceLike,
  durableObjectClass,
  durableObjectStore,
  EdgelimitDurableObject,
  type EvaluateRequest,
  type ResetRequest,
  type SqlStorage,
  withWaitUntil,
} from '../../../src/cloudflare.js'
import {
  algorithmSpec,
  approximate as approximateConsistency,
  createLimiter,
  fixedWindow,
  slidingWindow,
} from '../../../src/index.js'
import { encodeRules } from '../../../src/stores/durable-object/protocol.js'
import { serializeState } from '../../../src/stores/durable-object/rule-set.js'
import { manualClock, storeConformance } from '../../../src/testing/index.js'
import { farWindow } from '../../support/window.js'
import { replay, type Trace } from './trace.js'

export { EdgelimitDurableObject }

/** Sweeps expired rows soon after they expire, so a test can watch the alarm at work. */
export class QuickSweep extends EdgelimitDurableObject {
  static override sweepEveryMs = 200

  /**
   * What the object stores: the names of its tables and indexes (not workerd's own, `_cf_…`,
   * which holds the alarm), and its alarm's time.
   */
  async storage() {
    const { storage } = (
      this as unknown as {
        ctx: { storage: { sql: SqlStorage; getAlarm(): Promise<number | null> } }
      }
    ).ctx
    return {
      names: storage.sql
        .exec('SELECT name FROM sqlite_master')
        .toArray()
        .map((row) => row.name)
        .filter((name) => !String(name).startsWith('_cf_')),
      alarm: await storage.getAlarm(),
    }
  }
}

/** A class built for one algorithm: it refuses rule sets with any other. */
export const FixedWindowOnly = durableObjectClass(fixedWindow)

/** Answers a key named `sleep<ms>-…` that many ms late: a slow object, for the decision deadline. */
export class SlowObject extends EdgelimitDurableObject {
  // @ts-expect-error: over RPC an answer may come as a promise, as this one does.
  override async evaluate(request: EvaluateRequest) {
    const ms = Number(/^sleep(\d+)-/.exec(request.key)?.[1] ?? 0)
    await new Promise((resolve) => setTimeout(resolve, ms))
    return super.evaluate(request)
  }

  // Answered as late for a reset (a promise of nothing: the same type as the object's).
  override async reset(request: ResetRequest) {
    const ms = Number(/^sleep(\d+)-/.exec(request.key)?.[1] ?? 0)
    await new Promise((resolve) => setTimeout(resolve, ms))
    return super.reset(request)
  }
}

const SEED_RULES = encodeRules(
  createLimiter({ rules: [{ name: 'first', algorithm: fixedWindow({ limit: 1, window: '1h' }) }] }).rules,
)

/** Writes a sliding log's row as the object itself writes it: for checks on logs too long to admit one by one. */
export class SeededLog extends EdgelimitDurableObject {
  seed(key: string, rule: string, times: number[]): number {
    // The object creates its table with its first write: one on a key of its own.
    this.evaluate({ rules: SEED_RULES, key: `${key}-first`, cost: 1 })
    const state = serializeState({ times, sums: times.map((_, i) => i + 1), head: 0 })
    const { sql } = (this as unknown as { ctx: { storage: { sql: SqlStorage } } }).ctx.storage
    sql.exec(
      'INSERT OR REPLACE INTO edgelimit_state VALUES (?, ?, ?, ?, ?)',
      key,
      rule,
      'sliding-log',
      state,
      Date.now() + 86_400_000,
    )
    return state.length
  }
}

interface Env {
  LIMITER: DurableObjectNamespaceLike
  SWEEP?: DurableObjectNamespaceLike
  SLOW?: DurableObjectNamespaceLike
  FIXED?: DurableObjectNamespaceLike
  SEEDED?: DurableObjectNamespaceLike
}

interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void
}

const PURE = { timeout: false, breaker: false, denyCache: false } as const

function storeOf(env: Env, url: URL) {
  const shards = url.searchParams.get('shards')
  return durableObjectStore({
    namespace: env.LIMITER,
    clock: 'client',
    prefix: url.searchParams.get('prefix') ?? 'test',
    ...(shards ? { shards: Number(shards) } : {}),
  })
}

/** `n` concurrent cost-1 calls on one key straight to the store, all at the same client time. */
async function burst(env: Env, url: URL, body: { algorithm: AlgorithmSpec; n: number; at: number }) {
  // The spec arrived as JSON: plain data, turned back into the factory's spec.
  const rules = [{ name: 'burst', algorithm: algorithmSpec(body.algorithm) }]
  const limiter = createLimiter({ rules, store: storeOf(env, url), clock: manualClock(body.at), ...PURE })
  const key = `burst-${crypto.randomUUID()}`
  const decisions = await Promise.all(Array.from({ length: body.n }, () => limiter.limit(key)))
  return { admitted: decisions.filter((d) => d.allowed).length, limit: decisions[0]?.limit }
}

async function handle(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  const url = new URL(request.url)
  const cases = () =>
    storeConformance({ store: () => storeOf(env, url), keyPrefix: url.searchParams.get('run') ?? 'c' })
  switch (url.pathname) {
    case '/conformance/names':
      return Response.json(cases().map((c) => c.name))
    case '/conformance/run': {
      const c = cases()[Number(url.searchParams.get('case'))]
      if (c === undefined) return new Response('no such case', { status: 404 })
      try {
        await c.run()
        return Response.json({ ok: true })
      } catch (error) {
        return Response.json({ ok: false, error: String(error) })
      }
    }
    case '/trace':
      return Response.json(await replay((await request.json()) as Trace, () => storeOf(env, url)))
    case '/burst':
      return Response.json(await burst(env, url, await request.json()))
    case '/rpc': {
      // The raw RPC, for checks on the object itself (of the `binding` class, LIMITER by default):
      // `evaluate` unless `method` says otherwise; `seed` takes `args`, `storage` (QuickSweep) none.
      const body = (await request.json()) as EvaluateRequest & {
        object: string
        binding?: 'SWEEP' | 'SEEDED'
        method?: 'evaluate' | 'reset' | 'seed' | 'storage'
        args?: unknown[]
      }
      const namespace = (
        body.binding === undefined ? env.LIMITER : env[body.binding]
      ) as DurableObjectNamespaceLike
      const stub = namespace.get(namespace.idFromName(body.object)) as unknown as Record<
        string,
        (...args: unknown[]) => Promise<unknown>
      >
      const method = body.method ?? 'evaluate'
      try {
        return Response.json((await stub[method]?.(...(body.args ?? [body]))) ?? null)
      } catch (error) {
        return Response.json({ error: String(error) }, { status: 500 })
      }
    }
    case '/deadline': {
      // One limiter per isolate, as a Worker would have: its calls from concurrent requests share
      // the deadline's clock.
      deadlineLimiter ??= createLimiter({
        rules: [{ name: 'slow', algorithm: fixedWindow({ limit: 1000, window: '1h' }) }],
        store: durableObjectStore({ namespace: env.SLOW as DurableObjectNamespaceLike, prefix: 'slow' }),
        timeout: 1000,
        breaker: false,
        denyCache: false,
      })
      const key = url.searchParams.get('key') ?? 'k'
      if (url.searchParams.has('reset')) {
        return Response.json(
          await deadlineLimiter.reset(key).then(
            () => ({ reset: true }),
            (error: unknown) => ({ reset: false, ...coded(error) }),
          ),
        )
      }
      const d = await deadlineLimiter.limit(key)
      return Response.json({ allowed: d.allowed, reason: d.reason ?? null })
    }
    case '/store-error': {
      // A sliding-window rule on the fixed-window-only class: the object refuses the rule set.
      const events: unknown[] = []
      const limiter = createLimiter({
        rules: [{ name: 'sw', algorithm: slidingWindow({ limit: 10, window: '1m' }) }],
        store: durableObjectStore({ namespace: env.FIXED as DurableObjectNamespaceLike, prefix: 'fixed' }),
        breaker: false,
        onEvent: (e) => {
          if (e.type === 'store-error')
            events.push({ kind: e.kind, ...coded(e.error), cause: causeOf(e.error) })
        },
      })
      const decision = await limiter.limit('k')
      const reset = await limiter.reset('k').then(
        () => null,
        (error: unknown) => ({ ...coded(error), cause: causeOf(error) }),
      )
      return Response.json({ reason: decision.reason, events, reset })
    }
    case '/configure': {
      // createLimiter on this store with the rules posted (plain specs): the issues it refuses.
      const rules = (await request.json()) as {
        name: string
        algorithm: AlgorithmSpec
        consistency?: 'local'
      }[]
      try {
        createLimiter({
          rules: rules.map((r) => ({ ...r, algorithm: algorithmSpec(r.algorithm) })),
          store: durableObjectStore({ namespace: env.LIMITER }),
        })
        return Response.json({ issues: [] })
      } catch (error) {
        return Response.json({ ...coded(error), issues: (error as { issues?: unknown }).issues ?? null })
      }
    }
    case '/approximate':
      return approximate(request, env, ctx, url)
    case '/approximate/peek': {
      // The same rule, strict: what the object holds now.
      const strict = createLimiter({
        rules: [{ name: 'approx', algorithm: approxRule() }],
        store: durableObjectStore({ namespace: env.LIMITER, prefix: 'approx' }),
      })
      return Response.json({ remaining: (await strict.peek(url.searchParams.get('key') ?? 'k')).remaining })
    }
    default:
      return new Response('not found', { status: 404 })
  }
}

/** An error's code and message, as the vitest side checks them. */
function coded(error: unknown) {
  return { code: (error as { code?: string }).code ?? null, message: String((error as Error).message) }
}

/** What an error's `cause` is: the error that came over RPC (its name and message), or null. */
function causeOf(error: unknown) {
  const cause = (error as { cause?: unknown }).cause
  return cause instanceof Error ? { name: cause.name, message: cause.message } : null
}

let deadlineLimiter: ReturnType<typeof createLimiter> | undefined

let approx: AlgorithmSpec | undefined
/**
 * The approximate rule: it counts on the object's clock, so a window whose end the test cannot
 * cross (an hour's at XX:00:00 would lose its counts), chosen on first use (a Worker's global scope
 * may not read the clock).
 */
const approxRule = () => (approx ??= fixedWindow({ limit: 1000, window: farWindow() }))

// One limiter per isolate, as a Worker would have: an approximate rule decided in-process, its
// counts sent to the object after each response through ctx.waitUntil.
let approximateLimiter: ReturnType<typeof createLimiter> | undefined
function approximate(request: Request, env: Env, ctx: ExecutionContext, url: URL): Promise<Response> {
  approximateLimiter ??= createLimiter({
    rules: [
      {
        name: 'approx',
        algorithm: approxRule(),
        consistency: approximateConsistency,
        syncInterval: '1h',
      },
    ],
    store: durableObjectStore({ namespace: env.LIMITER, prefix: 'approx' }),
  })
  const limiter = approximateLimiter
  const key = url.searchParams.get('key') ?? 'k'
  const handler = withWaitUntil(async () => {
    const d = await limiter.limit(key)
    return Response.json({ allowed: d.allowed, remaining: d.remaining })
  }, limiter)
  return handler(request, env, ctx)
}

export default {
  fetch: handle,
}
