/**
 * The three calls the Redis store needs, over whichever client the user has. Each shim is glue
 * only; the store never sees a client's own API.
 */
export interface ScriptClient {
  readonly kind: 'ioredis' | 'node-redis' | 'upstash'
  /** A Redis Cluster client: one script call may only carry keys of one slot. */
  readonly cluster: boolean
  /**
   * Sends the commands of one tick together (node-redis) or as one HTTP request each (Upstash),
   * rather than writing each as it is issued (ioredis, auto-pipelining or not: see below).
   */
  readonly pipelined: boolean
  /**
   * Runs commands in the order they are issued, as one connection per node does (ioredis,
   * node-redis): a DEL issued before an EVALSHA on the same key runs first. Not so over REST
   * (Upstash), where each command is a request of its own.
   */
  readonly ordered: boolean
  /** ioredis's `keyPrefix`, which it writes before every key. */
  readonly keyPrefix?: unknown
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>
  eval(script: string, keys: string[], args: string[]): Promise<unknown>
  del(keys: string[]): Promise<unknown>
}

type Fn = (...args: never[]) => unknown
type Loose = Record<string, unknown>

function has(client: Loose, name: string): boolean {
  return typeof client[name] === 'function'
}

function call(client: Loose, name: string, ...args: unknown[]): Promise<unknown> {
  return Promise.resolve((client[name] as Fn).apply(client, args as never[]))
}

/**
 * Wraps an ioredis `Redis` or `Cluster`, a node-redis client or cluster (`createClient`,
 * `createCluster`), or an `@upstash/redis` `Redis`; `undefined` for anything else.
 */
export function toScriptClient(client: unknown): ScriptClient | undefined {
  if (typeof client !== 'object' || client === null) return undefined
  const c = client as Loose
  // node-redis v4+ names the command evalSha and takes { keys, arguments }.
  if (has(c, 'evalSha') && has(c, 'scriptLoad')) {
    return {
      kind: 'node-redis',
      cluster: has(c, 'getSlotMaster'),
      pipelined: true,
      ordered: true,
      evalsha: (sha, keys, args) => call(c, 'evalSha', sha, { keys, arguments: args }),
      eval: (script, keys, args) => call(c, 'eval', script, { keys, arguments: args }),
      del: (keys) => call(c, 'del', keys),
    }
  }
  // @upstash/redis: evalsha(sha, keys, args) over REST.
  if (has(c, 'evalsha') && has(c, 'scriptLoad')) {
    return {
      kind: 'upstash',
      cluster: false,
      pipelined: true,
      ordered: false,
      evalsha: (sha, keys, args) => call(c, 'evalsha', sha, keys, args),
      eval: (script, keys, args) => call(c, 'eval', script, keys, args),
      del: (keys) => call(c, 'del', ...keys),
    }
  }
  // ioredis (Redis and Cluster): evalsha(sha, numkeys, ...keys, ...args); it flattens array
  // arguments itself, so the arrays are passed as they are (no copy).
  if (has(c, 'evalsha') && has(c, 'eval')) {
    // With `enableAutoPipelining`, ioredis holds every command until a setImmediate and writes
    // them together. The store coalesces decisions itself, so its script calls take ioredis's
    // own EVALSHA without that queue (`createBuiltinCommand`: same command, key prefix and reply
    // encoding): a full batch leaves at once, and Redis runs it while the next one fills.
    const options = c.options as { enableAutoPipelining?: unknown; keyPrefix?: unknown } | undefined
    // A reset's DEL takes the same way, so that it stays in line with the decisions around it.
    const auto = options?.enableAutoPipelining === true
    const builtin = (name: string) =>
      auto && has(c, 'createBuiltinCommand')
        ? (c.createBuiltinCommand as (name: string) => { string?: unknown }).call(c, name).string
        : undefined
    const own = builtin('evalsha')
    const direct = typeof own === 'function'
    const evalsha = (direct ? own : c.evalsha) as (...args: unknown[]) => Promise<unknown>
    const del = (direct ? builtin('del') : c.del) as (...args: unknown[]) => Promise<unknown>
    return {
      kind: 'ioredis',
      cluster: c.isCluster === true,
      pipelined: auto && !direct,
      ordered: true,
      keyPrefix: options?.keyPrefix,
      evalsha: (sha, keys, args) => evalsha.call(c, sha, keys.length, keys, args),
      eval: (script, keys, args) => call(c, 'eval', script, keys.length, keys, args),
      del: (keys) => Promise.resolve(del.apply(c, keys)),
    }
  }
  return undefined
}
