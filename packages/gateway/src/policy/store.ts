import { memoryStore, type Store } from 'edgelimit'
import { redisStore } from 'edgelimit/redis'
import type { Cluster, Redis, RedisOptions } from 'ioredis'
import type { StoreConfig } from '../config/types.js'
import { within } from '../library.js'

/** A store and the connection behind it, shared by every limiter of a policy (and across reloads). */
export interface StoreHandle {
  /** The store's configuration as JSON: an unchanged store is kept on reload. */
  readonly signature: string
  readonly type: StoreConfig['type']
  readonly store: Store
  /** True for stores that answer in-process (no latency, no errors to report). */
  readonly inProcess: boolean
  /** Resolves once the connection is usable (at once for memory and Upstash). */
  ready(timeoutMs: number): Promise<void>
  /**
   * One round trip to the store (`PING`): resolves when it answers, rejects when it fails or has
   * not answered within `timeoutMs`. At once for memory. Upstash has no connection to wait for:
   * this is the only way to know it is reachable before a decision is sent.
   */
  ping(timeoutMs: number): Promise<void>
  /** `ready`, `connecting`, … as the client reports it; `ready` for the memory store. */
  status(): string
  close(): Promise<void>
}

// Fail fast: a queued or retried script could charge twice; the limiter decides per onStoreError.
const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  retryStrategy: () => 100,
  lazyConnect: false,
}

/**
 * Opens the store a policy names. Redis clients are ioredis (`Redis` or `Cluster`); Upstash is
 * the REST client.
 *
 * @example const handle = openStore({ type: 'redis', url: 'redis://127.0.0.1:6379', prefix: 'edgelimit' })
 */
export async function openStore(config: StoreConfig): Promise<StoreHandle> {
  try {
    return await connect(config)
  } catch (error) {
    // A client refusing its options (a URL it parses differently) says which store it was.
    throw new Error(`cannot open the ${config.type} store: ${(error as Error).message}`, { cause: error })
  }
}

async function connect(config: StoreConfig): Promise<StoreHandle> {
  const signature = JSON.stringify(config)
  switch (config.type) {
    case 'memory':
      return {
        signature,
        type: config.type,
        store: memoryStore({ maxKeys: config.maxKeys }),
        inProcess: true,
        ready: async () => {},
        ping: async () => {},
        status: () => 'ready',
        close: async () => {},
      }
    case 'redis':
    case 'redis-cluster': {
      // Loaded only for Redis policies: a memory-store gateway starts faster without it.
      const { Cluster, Redis } = await import('ioredis')
      const client =
        config.type === 'redis'
          ? new Redis(config.url, FAIL_FAST)
          : new Cluster(config.nodes.map(nodeAddress), {
              enableOfflineQueue: false,
              clusterRetryStrategy: () => 100,
              redisOptions: { ...FAIL_FAST, ...clusterAuth(config.nodes) },
            })
      // Errors surface per decision (and in metrics); an unhandled 'error' event would crash.
      client.on('error', () => {})
      // Ends a wait for readiness: a client closed while connecting ends only when its socket does.
      const closed = new AbortController()
      return {
        signature,
        type: config.type,
        store: redisStore({ client, prefix: config.prefix }),
        inProcess: false,
        ready: (timeoutMs) => untilReady(client, timeoutMs, closed.signal),
        ping: (timeoutMs) => answered(client.ping(), timeoutMs),
        status: () => client.status,
        close: async () => {
          closed.abort()
          client.disconnect()
        },
      }
    }
    case 'upstash': {
      const { Redis: Upstash } = await import('@upstash/redis')
      // No retry: @upstash/redis resends a request whose fetch failed (5 times by default; with
      // `retry: false` still once), and a script that ran before the connection broke charges again.
      // A timeout per request (a function: a signal object would make an aborted request a
      // result): a request that never answers would hold every later reset of its limiter.
      const client = new Upstash({
        url: config.url,
        token: config.token,
        enableTelemetry: false,
        retry: { retries: 0 },
        signal: () => AbortSignal.timeout(config.timeoutMs),
      })
      return {
        signature,
        type: config.type,
        store: redisStore({ client, prefix: config.prefix }),
        inProcess: false,
        ready: async () => {},
        ping: (timeoutMs) => answered(client.ping(), timeoutMs),
        status: () => 'ready',
        close: async () => {},
      }
    }
  }
}

/** Resolves once `reply` has, rejects with its error or after `timeoutMs`. */
async function answered(reply: Promise<unknown>, timeoutMs: number): Promise<void> {
  let failure: { error: unknown } | undefined
  const settled = reply.then(
    () => undefined,
    (error: unknown) => {
      failure = { error }
    },
  )
  if (!(await within(settled, timeoutMs)))
    throw new Error(`the store did not answer a PING within ${timeoutMs} ms`)
  if (failure !== undefined) throw failure.error
}

function nodeAddress(node: string): { host: string; port: number } {
  const url = new URL(node.includes('://') ? node : `redis://${node}`)
  // The URL keeps an IPv6 host in its brackets; the client connects to the address alone.
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port || 6379) }
}

function clusterAuth(nodes: readonly string[]): RedisOptions {
  const first = nodes.find((n) => n.includes('://'))
  if (first === undefined) return {}
  const url = new URL(first)
  return {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
  }
}

/** Resolves once `client` is ready; rejects after `timeoutMs`, or at once when the store is closed meanwhile. */
function untilReady(client: Redis | Cluster, timeoutMs: number, closed: AbortSignal): Promise<void> {
  if (client.status === 'ready') return Promise.resolve()
  if (closed.aborted) return Promise.reject(new Error('the store was closed'))
  return new Promise((resolve, reject) => {
    const settle = (error?: Error) => {
      clearTimeout(timer)
      client.off('ready', onReady)
      closed.removeEventListener('abort', onClosed)
      if (error === undefined) resolve()
      else reject(error)
    }
    const timer = setTimeout(
      () =>
        settle(new Error(`the store did not become ready within ${timeoutMs} ms (status ${client.status})`)),
      timeoutMs,
    )
    const onReady = () => settle()
    const onClosed = () => settle(new Error('the store was closed'))
    client.once('ready', onReady)
    closed.addEventListener('abort', onClosed)
  })
}
