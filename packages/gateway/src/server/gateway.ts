import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import { type Clock, type MemoryStore, systemClock } from 'edgelimit'
import type { Logger } from 'pino'
import { type Issue, PolicyError } from '../config/issues.js'
import type { GatewayConfig, UpstreamConfig } from '../config/types.js'
import { upstreamOverrideProblems } from '../config/upstream-url.js'
import { loadPolicy } from '../config/validate.js'
import { compilePolicy } from '../policy/compile.js'
import { openStore } from '../policy/store.js'
import { openUpstream } from '../proxy/forward.js'
import { type AdminServer, startAdmin } from './admin.js'
import { type DemoOrigin, startDemoOrigin } from './demo-origin.js'
import { type Generation, trackGenerations } from './generation.js'
import { createMetrics, type Metrics } from './metrics.js'
import { watchPolicy } from './policy-watch.js'
import { createProxyServer } from './proxy-server.js'
import { readiness } from './readiness.js'
import { createReloader } from './reload.js'
import { shutdown } from './shutdown.js'
import { warnAbout } from './warn-about.js'

/** Options of `startGateway` (the `serve` command's flags). */
export interface GatewayOptions {
  /** The policy file; watched for changes unless `watch` is false. */
  config: string
  /**
   * Overrides the policy's `upstream` URL. Without either, the built-in demo origin is started.
   * Checked as the policy's is (docs/decisions/0015-upstream-url-is-an-address.md): a URL that is
   * not http or https, or holds a user, password, query or fragment, is refused with a
   * `PolicyError` (`ERR_URL` at `upstream`, the URL masked), before anything is opened.
   */
  upstream?: string | undefined
  /** @default 8080 (0: any free port) */
  port?: number
  /** @default '127.0.0.1' */
  host?: string
  /** @default 9090 (0: any free port) */
  adminPort?: number
  /** @default '127.0.0.1' */
  adminHost?: string
  /** Bearer token of the admin API; overrides the policy's `admin.token`. */
  adminToken?: string | undefined
  logger: Logger
  /** Reload when the file changes. @default true */
  watch?: boolean
  /**
   * How long `close()` waits for requests in flight; the final flush of approximate counts and
   * the store's close get what is left of it (at least 3 s), then the gateway stops anyway.
   * @default 30_000
   */
  drainTimeoutMs?: number
  /** How long to wait for a remote store's connection at start and on reload. @default 10_000 */
  storeTimeoutMs?: number
  /**
   * Environment for `${VAR}` in the policy, at start and on every reload (a reload reads the
   * file again, not a new environment: the process's cannot change from outside). @default process.env
   */
  env?: Readonly<Record<string, string | undefined>>
  /**
   * Where decisions read the time (programmatic only: no flag or header sets it). Tests and
   * replays pass a manual clock. @default systemClock
   */
  clock?: Clock
}

/** A running gateway. */
export interface Gateway {
  readonly port: number
  readonly adminPort: number
  /** Where requests go (the demo origin's URL when none was given). */
  readonly upstreamUrl: string
  readonly demo: boolean
  readonly config: GatewayConfig
  readonly generation: number
  readonly metrics: Metrics
  /**
   * Loads the file again; an invalid file, or one whose store or upstream cannot be opened, is
   * rejected (and logged) and the current policy stays. One under way when `close()` begins is
   * abandoned (`ok: false`): what it opened is closed. Never rejects.
   */
  reload(reason?: string): Promise<ReloadResult>
  /**
   * Stops accepting, drains requests in flight (up to the drain timeout), flushes approximate
   * counts (for what is left of it, at least 3 s: rules whose counts were not sent are logged),
   * then closes everything, a reload under way included. Never waits on a store that does not answer.
   */
  close(): Promise<void>
}

/** How a reload ended: `issues` of an invalid file, `error` when a valid one could not be put in force. */
export interface ReloadResult {
  readonly ok: boolean
  readonly issues: readonly Issue[]
  readonly error?: string
}

const DEFAULT_UPSTREAM: Omit<UpstreamConfig, 'url'> = {
  timeoutMs: 30_000,
  connectTimeoutMs: 5_000,
  bodyTimeoutMs: 300_000,
  connections: 128,
  preserveHost: false,
}

/**
 * Starts `edgelimit serve`: the proxy on `port`, operations (`/metrics`, `/healthz`, `/readyz`,
 * the admin API) on `adminPort`.
 *
 * @throws {PolicyError} when the policy file is invalid, or the `upstream` option (`ERR_URL`).
 * @example const gateway = await startGateway({ config: 'edgelimit.yaml', port: 0, adminPort: 0, logger: pino() })
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  // The override is the same at every reload: checked once, as `--upstream` is.
  if (options.upstream !== undefined) {
    const problems = upstreamOverrideProblems(options.upstream)
    if (problems.length > 0)
      throw new PolicyError(problems.map((message) => ({ path: ['upstream'], code: 'ERR_URL', message })))
  }
  const file = resolve(options.config)
  const log = options.logger
  const env = options.env ?? process.env
  const storeTimeoutMs = options.storeTimeoutMs ?? 10_000
  const clock = options.clock ?? systemClock
  const metrics = createMetrics({ dashboard: { now: () => clock.now() } })
  const sink = (rule: string, tier: string, openMs: number) => metrics.limiterEvents(rule, tier, openMs)

  const first = loadPolicy(file, env)
  warnAbout(first.config, log)
  let demo: DemoOrigin | undefined
  const upstreamFor = async (config: GatewayConfig): Promise<UpstreamConfig> => {
    const url = options.upstream ?? config.upstream?.url
    if (url !== undefined) return { ...DEFAULT_UPSTREAM, ...config.upstream, url }
    demo ??= await startDemoOrigin()
    return { ...DEFAULT_UPSTREAM, ...config.upstream, url: demo.url }
  }
  const firstStore = await openStore(first.config.store)
  // A start that fails from here on (a port in use) closes what it opened, newest first.
  const opened: (() => unknown)[] = [() => firstStore.close(), () => demo?.close()]
  async function starting<T>(step: () => T | Promise<T>): Promise<T> {
    try {
      return await step()
    } catch (error) {
      for (const close of opened.reverse()) await Promise.resolve(close()).catch(() => {})
      throw error
    }
  }
  await firstStore.ready(storeTimeoutMs).catch((error: Error) => {
    log.warn(
      { store: first.config.store.type, err: error.message },
      'store not ready; rules answer by onStoreError',
    )
  })
  const firstGeneration: Generation = await starting(async () => ({
    id: 1,
    policy: compilePolicy(first.config, firstStore, undefined, sink, clock),
    upstream: openUpstream(await upstreamFor(first.config)),
    text: first.source.text,
    inFlight: 0,
    retired: false,
  }))
  const generations = trackGenerations(firstGeneration, metrics, log)
  const proxy = createProxyServer({
    first: firstGeneration,
    metrics,
    log,
    clock,
    release: generations.release,
  })
  const { server, plain } = proxy
  opened.push(() => proxy.current.upstream.close())
  metrics.generation.set(1)
  metrics.inForce(firstGeneration.policy.rules, !firstGeneration.policy.store.inProcess)
  metrics.memoryStoreKeys = () => {
    const { store } = proxy.current.policy.store
    return store.name === 'memory' ? (store as MemoryStore).size : undefined
  }
  opened.push(() => {
    plain.close()
    return new Promise((r) => server.close(r))
  })
  await starting(() => listen(server, options.port ?? 8080, options.host ?? '127.0.0.1'))

  const reloader = createReloader({
    file,
    env,
    storeTimeoutMs,
    log,
    metrics,
    clock,
    sink,
    upstreamFor,
    proxy,
    generations,
  })
  const reload = reloader.reload

  if (options.watch !== false) {
    const started = await starting(() =>
      watchPolicy({ file, log, changed: () => void reload('file changed', true) }),
    )
    reloader.watching = started
    opened.push(() => started.close())
  }

  const admin: AdminServer = await starting(() =>
    startAdmin({
      port: options.adminPort ?? 9090,
      host: options.adminHost ?? '127.0.0.1',
      metrics,
      log,
      token: () => options.adminToken ?? proxy.current.policy.config.admin.token,
      policy: () => proxy.current.policy,
      ready: () => ({
        ...readiness(proxy.current.policy, proxy.draining),
        generation: proxy.current.id,
        upstream: proxy.current.upstream.url.origin,
      }),
      reload: () => reload('admin API'),
    }),
  )

  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    shutdown({
      proxy,
      generations,
      reloader,
      admin,
      demo: () => demo,
      metrics,
      log,
      drainTimeoutMs: options.drainTimeoutMs ?? 30_000,
    })

  const port = (server.address() as AddressInfo).port
  return {
    port,
    adminPort: admin.port,
    get upstreamUrl() {
      return proxy.current.upstream.url.href.replace(/\/$/, '')
    },
    get demo() {
      return demo !== undefined && proxy.current.upstream.url.origin === new URL(demo.url).origin
    },
    get config() {
      return proxy.current.policy.config
    },
    get generation() {
      return proxy.current.id
    },
    metrics,
    reload: (reason) => reload(reason ?? 'manual'),
    close: () => {
      closing ??= close()
      return closing
    },
  }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}
