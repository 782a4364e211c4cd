import { ConfigError, EdgelimitError } from '../../errors.js'
import { timedOut } from '../../resilience/deadline.js'
import { remoteDecider } from '../../resilience/remote.js'
import { createIssues } from '../../validate.js'
import type { BoundRules, Store, StoreRule } from '../types.js'
import type { DurableObjectNamespaceLike } from './platform.js'
import { type EdgelimitStub, encodeRules, shardOf } from './protocol.js'

/** Options of the Durable Object store. */
export interface DurableObjectStoreOptions {
  /** The namespace binding of `EdgelimitDurableObject` (`env.RATE_LIMITER`). */
  namespace: DurableObjectNamespaceLike
  /**
   * How keys map onto objects. Omitted: one object per key (`idFromName(<prefix>:k:<key>)`), the
   * most parallel, and each key's object runs near its first caller. A number N: keys are spread
   * over N objects by a stable hash (fewer objects; each decides for many keys, one at a time,
   * so a shard tops out at one object's throughput).
   * @default one object per key
   * @example durableObjectStore({ namespace: env.RATE_LIMITER, shards: 64 })
   */
  shards?: number
  /**
   * Whose clock decides: `'object'` reads the time inside the Durable Object (every caller
   * agrees, whatever isolate or PoP it runs in); `'client'` passes the limiter's clock (manual
   * clocks in tests, replaying traces). @default 'object'
   */
  clock?: 'object' | 'client'
  /** Prepended to every object name, to keep several limiters' objects apart. @default 'edgelimit' */
  prefix?: string
  /** Where to create new objects (`'weur'`, `'enam'`, …), passed to `namespace.get()`. */
  locationHint?: string
}

/**
 * A store in Cloudflare Durable Objects: each decision is one RPC to the object that owns the key,
 * which runs every rule of the limiter for it atomically and all-or-nothing (see
 * `EdgelimitDurableObject`). Shadow rules and forced charges (`EvaluateOptions`) are honoured.
 *
 * @throws {ConfigError} listing every invalid option.
 * @example
 * import { env } from 'cloudflare:workers'
 * import { durableObjectStore } from 'edgelimit/cloudflare'
 * const limiter = createLimiter({ rules, store: durableObjectStore({ namespace: env.RATE_LIMITER }) })
 */
export function durableObjectStore(options: DurableObjectStoreOptions): Store {
  const issues = createIssues()
  // Read once; checked when `options` is an object.
  const { namespace, shards, clock, prefix = 'edgelimit', locationHint } = options ?? {}
  if (issues.object('options', options, 'namespace shards clock prefix locationHint')) {
    issues.expect(
      'namespace',
      namespace,
      typeof namespace?.idFromName === 'function' && typeof namespace.get === 'function',
      'ERR_NAMESPACE',
      'a Durable Object namespace (env.RATE_LIMITER)',
    )
    if (shards !== undefined) issues.integer('shards', shards, 1, 1_000_000)
    if (clock !== undefined) issues.oneOf('clock', clock, ['object', 'client'])
    issues.string('prefix', prefix)
    issues.string('locationHint', locationHint)
  }
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  const clientClock = clock === 'client'
  const getOptions = locationHint === undefined ? undefined : { locationHint }
  const nameOf =
    shards === undefined
      ? (key: string) => `${prefix}:k:${key}`
      : (key: string) => `${prefix}:s:${shards}:${shardOf(key, shards)}`
  // One RPC to the key's object, through a stub of its own (stubs belong to the request that made
  // them on Workers). Async, so that a failure to reach the object is a rejection the limiter's
  // failure policy sees. An error comes over RPC without its code: each is the store's, with the
  // original as its `cause` and its message (an Error's name when it has none; a value that is not
  // an Error, as a string).
  const call = async <M extends keyof EdgelimitStub>(
    key: string,
    method: M,
    request: Parameters<EdgelimitStub[M]>[0],
  ): Promise<Awaited<ReturnType<EdgelimitStub[M]>>> => {
    try {
      const stub = namespace.get(namespace.idFromName(nameOf(key)), getOptions) as unknown as Record<
        M,
        (request: unknown) => ReturnType<EdgelimitStub[M]>
      >
      return await stub[method](request)
    } catch (error) {
      const failure = new EdgelimitError('ERR_EDGELIMIT_STORE', String((error as Error)?.message || error))
      failure.cause = error
      throw failure
    }
  }

  return {
    name: 'durable-object',
    decider: remoteDecider,
    bind(rules): BoundRules {
      // The object keeps a sliding log in one SQLite value, one entry per admitted instant, and
      // workerd refuses a value over about 2 MB: a `limit` up to 100,000 fits with room to spare.
      // A `local` rule never reaches the object (the limiter binds every rule here first).
      const issues = createIssues()
      rules.forEach(({ compiled, consistency }: StoreRule & { consistency?: string }, i) => {
        if (compiled.kind === 'log' && consistency !== 'local')
          issues.integer(`rules[${i}].algorithm.limit`, compiled.limit, 1, 100_000)
      })
      if (issues.list.length > 0) throw new ConfigError(issues.list)
      const spec = encodeRules(rules)
      return {
        evaluate: (key, cost, now, opts) =>
          call(key, 'evaluate', {
            rules: spec,
            key,
            cost,
            now: clientClock ? now : undefined,
            // `shadow` and `force`, when given.
            ...opts,
          }),
        // Within the limiter's deadline, as on Redis: a hung object must not hold a reset forever.
        reset(key, waitMs) {
          let timer: ReturnType<typeof setTimeout> | undefined
          return Promise.race([
            call(key, 'reset', { rules: spec, key }),
            new Promise<void>((_, reject) => {
              // No timer without a deadline (`undefined >= 0` is false). A timer above 2^31 - 1 ms
              // fires at once on Node: a longer deadline ('30d') waits 2e9 ms (23 days), and says so.
              // (The bound written twice gzips smaller than a binding of its own: the store's budget.)
              if ((waitMs as number) >= 0)
                timer = setTimeout(
                  reject,
                  Math.min(2e9, waitMs as number),
                  timedOut(Math.min(2e9, waitMs as number)),
                )
            }),
          ]).finally(() => clearTimeout(timer))
        },
      }
    },
  }
}
