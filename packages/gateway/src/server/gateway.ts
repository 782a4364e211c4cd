import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import type { Duplex } from 'node:stream'
import { type Clock, type Limiter, type MemoryStore, systemClock } from 'edgelimit'
import type { Logger } from 'pino'
import { formatIssue, type Issue } from '../config/issues.js'
import { readPolicySource } from '../config/source.js'
import type { GatewayConfig, UpstreamConfig } from '../config/types.js'
import { checkSource, loadPolicy } from '../config/validate.js'
import { within } from '../library.js'
import { type CompiledPolicy, compilePolicy, labelsGone } from '../policy/compile.js'
import { decide, decideSync, type Verdict } from '../policy/decide.js'
import { canonicalTarget } from '../policy/path.js'
import { fromIncoming, hostLines, type RequestInfo } from '../policy/request.js'
import { openStore, type StoreHandle } from '../policy/store.js'
import { refusedForSize } from '../proxy/body-limit.js'
import { openUpstream, type Upstream } from '../proxy/forward.js'
import { answerClientError, endWithProblem, goneStatus, sendProblem } from '../proxy/problem.js'
import { isWebSocket, replayAsRequest, type TunnelSink, upgradeResponse } from '../proxy/tunnel.js'
import { type AdminServer, startAdmin } from './admin.js'
import { applyClientTimeouts, CONNECTIONS_CHECK_MS, quietFor } from './client-timeouts.js'
import { type DemoOrigin, startDemoOrigin } from './demo-origin.js'
import { lingerOnClose } from './lingering-close.js'
import { createMetrics, type Metrics } from './metrics.js'
import { pendingResponses } from './pending-responses.js'
import { type PolicyWatch, watchPolicy } from './policy-watch.js'

/** Options of `startGateway` (the `serve` command's flags). */
export interface GatewayOptions {
  /** The policy file; watched for changes unless `watch` is false. */
  config: string
  /** Overrides the policy's `upstream`. Without either, the built-in demo origin is started. */
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

/** One policy in force: the compiled rules, the upstream, and the requests that use them. */
interface Generation {
  readonly id: number
  readonly policy: CompiledPolicy
  readonly upstream: Upstream
  readonly text: string
  inFlight: number
  retired: boolean
}

const DEFAULT_UPSTREAM: Omit<UpstreamConfig, 'url'> = {
  timeoutMs: 30_000,
  connectTimeoutMs: 5_000,
  connections: 128,
  preserveHost: false,
}

/**
 * Starts `edgelimit serve`: the proxy on `port`, operations (`/metrics`, `/healthz`, `/readyz`,
 * the admin API) on `adminPort`.
 *
 * @throws {PolicyError} when the policy file is invalid.
 * @example const gateway = await startGateway({ config: 'edgelimit.yaml', port: 0, adminPort: 0, logger: pino() })
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
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
  let current: Generation = await starting(async () => ({
    id: 1,
    policy: compilePolicy(first.config, firstStore, undefined, sink, clock),
    upstream: openUpstream(await upstreamFor(first.config)),
    text: first.source.text,
    inFlight: 0,
    retired: false,
  }))
  opened.push(() => current.upstream.close())
  metrics.generation.set(1)
  metrics.memoryStoreKeys = () => {
    const { store } = current.policy.store
    return store.name === 'memory' ? (store as MemoryStore).size : undefined
  }
  // Resources shared by generations are closed when the last generation using them is drained.
  const users = new Map<StoreHandle | Upstream, number>([
    [current.policy.store, 1],
    [current.upstream, 1],
  ])
  let inFlight = 0
  let draining = false
  let drained: (() => void) | undefined

  // What retired generations leave behind while their counts are flushed: shutdown flushes and
  // closes them too.
  const retiring = new Set<Limiter>()
  const unused = new Set<StoreHandle | Upstream>()
  // A store a reload opened and waits on: shutdown closes it, which ends the wait.
  const opening = new Set<StoreHandle>()

  /**
   * Puts a drained, retired generation away: its limiters that the policy in force does not keep
   * flush their approximate counts, and only then are the resources no generation uses any more
   * closed (a flush needs its store's connection).
   */
  function release(gen: Generation): void {
    const idle: (StoreHandle | Upstream)[] = []
    for (const resource of [gen.policy.store, gen.upstream]) {
      const n = (users.get(resource) ?? 1) - 1
      if (n > 0) users.set(resource, n)
      else {
        users.delete(resource)
        unused.add(resource)
        idle.push(resource)
      }
    }
    const retired = [...gen.policy.limiters]
      .filter(([signature, limiter]) => current.policy.limiters.get(signature) !== limiter)
      .map(([, limiter]) => limiter)
    for (const limiter of retired) retiring.add(limiter)
    for (const [rule, tier] of labelsGone(gen.policy, retired, current.policy))
      metrics.forgetBreaker(rule, tier)
    void flushAll(retired).then(async (result) => {
      for (const limiter of retired) retiring.delete(limiter)
      if (result.unsent.length > 0) {
        log.warn(
          { generation: gen.id, rules: ruleNames(result.unsent), err: result.error },
          'approximate counts of a retired policy not flushed',
        )
      }
      for (const resource of idle) {
        if (!unused.delete(resource)) continue // closed by shutdown meanwhile
        await resource
          .close()
          .catch((error: Error) => log.warn({ err: error.message }, 'closing a retired resource failed'))
      }
    })
  }

  function observe(verdict: Verdict, request: RequestInfo): void {
    for (const part of verdict.parts) {
      for (const r of part.decision.rules) {
        // A rule whose state is not known (failing open, or not asked) did not admit the request.
        const outcome = r.unknown ? 'unknown' : r.allowed ? 'allowed' : r.shadow ? 'shadow_denied' : 'denied'
        metrics.decision(part.rule.name, part.plan.tier, outcome, part.key)
        if (outcome === 'shadow_denied') {
          log.warn(
            {
              rule: part.rule.name,
              tier: part.plan.tier || undefined,
              key: part.key,
              method: request.method,
              path: request.path,
              limit: r.limit,
              retryAfterMs: Number.isFinite(r.retryAfterMs) ? r.retryAfterMs : null,
              mode: part.rule.config.mode === 'shadow' ? 'shadow' : `enforce ${part.rule.config.enforce}%`,
            },
            'shadow: would block',
          )
        }
      }
    }
  }

  /**
   * One request through the gateway: decided, then answered or forwarded (a WebSocket upgrade:
   * tunnelled); counted once answered.
   */
  class Handling implements TunnelSink {
    private settled = false
    private readonly gen = current
    private readonly started = performance.now()
    /**
     * `continues`: the client sent `Expect: 100-continue` and waits for the rules' word to send its
     * body. `upgrade`: a WebSocket handshake, its socket and the bytes read past its head.
     */
    constructor(
      private readonly req: IncomingMessage,
      private readonly res: ServerResponse,
      private readonly continues = false,
      private readonly upgrade?: { readonly socket: Duplex; readonly head: Buffer },
    ) {
      this.gen.inFlight++
      inFlight++
      metrics.inFlight++
      if (draining) res.setHeader('connection', 'close')
    }

    run(): void {
      try {
        // Rules see, and the upstream gets, one canonical path (ADR 0009).
        const hosts = hostLines(this.req.rawHeaders)
        const canonical =
          hosts > 1
            ? { error: 'The request has more than one Host header.' }
            : hosts === 0 && this.req.httpVersion === '1.1'
              ? { error: 'The request has no Host header (HTTP/1.1 requires one).' }
              : canonicalTarget(this.req.url ?? '/', this.req.headers.host)
        if ('error' in canonical) {
          sendProblem(this.res, 400, this.req.url ?? '/', canonical.error)
          this.done(400, 'none')
          return
        }
        this.req.url = canonical.target
        if (
          refusedForSize(this.req, this.res, canonical.target, this.gen.policy.config.clients.maxBodySize)
        ) {
          this.done(413, 'none')
          return
        }
        const policy = this.gen.policy
        const request = fromIncoming(this.req, this.upgrade !== undefined, policy.trustsPeer)
        if (policy.store.inProcess) this.proceed(request, decideSync(policy, request, clock.now()))
        else {
          this.watchAbort()
          decide(policy, request, clock.now()).then(
            (verdict) => this.proceed(request, verdict),
            (error: unknown) => this.fail(error),
          )
        }
      } catch (error) {
        this.fail(error)
      }
    }

    done(status: number | 'aborted', upstream: number | 'error' | 'aborted' | 'none'): void {
      if (this.settled) return
      this.settled = true
      if (status === 499) status = goneStatus(this.req.socket) // a 408 or 400 Node's parser answered
      const gen = this.gen
      gen.inFlight--
      inFlight--
      metrics.inFlight--
      metrics.response(status, upstream, (performance.now() - this.started) / 1000)
      if (gen.retired && gen.inFlight === 0) release(gen)
      if (draining && inFlight === 0) drained?.()
    }

    opened(socket: Duplex): void {
      metrics.tunnels++
      tunnels.add(socket)
      socket.once('close', () => {
        metrics.tunnels--
        tunnels.delete(socket)
      })
      // Closing the client's socket closes the upstream's (the pipe).
      socket.once('timeout', () => socket.destroy())
      quietFor(socket, current.policy.config.clients)
    }

    // While a request waits (a remote store, a shaping delay), its client may leave.
    private watchAbort(): void {
      this.res.once('close', () => this.done(499, 'aborted'))
    }

    private fail(error: unknown): void {
      const { req, res } = this
      log.error(
        { err: error instanceof Error ? error.message : String(error), path: req.url },
        'request failed',
      )
      if (!res.headersSent && !res.destroyed) {
        sendProblem(res, 500, req.url ?? '/', 'The gateway could not decide on this request.')
      }
      this.done(500, 'none')
    }

    private forward(verdict: Verdict): void {
      const { req, res, gen } = this
      // Only an admitted request is invited to send its body; any other answer (a 429) goes out
      // with `Connection: close` (Node's rule for an expectation not met), its body never read.
      if (this.continues) res.writeContinue()
      const trusted = gen.policy.trustsPeer(req.socket.remoteAddress)
      const upgrade = this.upgrade
      const max = gen.policy.config.clients.maxBodySize
      if (upgrade === undefined) gen.upstream.forward(req, res, verdict.headers, this, trusted, max)
      else gen.upstream.tunnel(req, res, upgrade.socket, upgrade.head, verdict.headers, this, trusted)
    }

    private proceed(request: RequestInfo, verdict: Verdict): void {
      const { res } = this
      if (verdict.parts.length > 0) observe(verdict, request)
      if (verdict.denial !== undefined) {
        const headers: Record<string, string> = {}
        for (const [name, value] of verdict.headers) headers[name.toLowerCase()] = value
        headers['content-type'] = 'application/problem+json'
        headers['cache-control'] = 'no-store'
        headers['content-length'] = String(Buffer.byteLength(verdict.denial.body))
        res.writeHead(verdict.denial.status, headers)
        res.end(verdict.denial.body)
        this.done(verdict.denial.status, 'none')
      } else if (verdict.delayMs > 0) {
        for (const part of verdict.parts) {
          const d = part.decision.delayMs ?? 0
          if (d > 0) metrics.delayed(part.rule.name, d)
        }
        if (!this.settled) this.watchAbort()
        setTimeout(() => {
          if (!res.destroyed) this.forward(verdict)
        }, verdict.delayMs)
      } else if (res.destroyed) this.done(499, 'aborted')
      else this.forward(verdict)
    }
  }

  /**
   * An HTTP server that hands its requests to `Handling`; `track`, when given, sees each request
   * first. One listener per event: Node copies the listener array of an event with several.
   */
  function httpServer(track?: (req: IncomingMessage, res: ServerResponse) => void): Server {
    // Pipelined requests are served one at a time: one waits until the answer before it is
    // complete (Node then gives its response the socket), and none is served after an answer
    // that closed the connection (a 413, a 429 to `Expect`: RFC 9112 §9.6), so none is charged.
    const serve = (req: IncomingMessage, res: ServerResponse, continues: boolean): void => {
      if (res.socket === null) res.once('socket', () => serve(req, res, continues))
      else if (req.socket.writable) new Handling(req, res, continues).run()
    }
    const accept = (req: IncomingMessage, res: ServerResponse, continues: boolean): void => {
      track?.(req, res)
      // An answer that closes the connection with the request's body unread reads it first
      // (nginx's lingering close).
      lingerOnClose(req)
      serve(req, res, continues)
    }
    // Host is checked in `run`, so that a request without one gets a problem like other 400s.
    const s = createServer(
      { requireHostHeader: false, connectionsCheckingInterval: CONNECTIONS_CHECK_MS },
      (req, res) => accept(req, res, false),
    )
    applyClientTimeouts(s, current.policy.config.clients)
    // Every header line in `req.headers`, which the rules read, as in `rawHeaders`, which the
    // upstream gets (Node's default keeps 1,000 there, more in `rawHeaders`); `maxHeaderSize`
    // (16 KiB) still bounds them.
    s.maxHeadersCount = 0
    // What the parser refuses never becomes a request: counted here (no start time: 0 s, as CONNECT).
    s.on('clientError', (error: Error, socket: Duplex) => {
      const status = answerClientError(error, socket)
      if (status !== undefined) metrics.response(status, 'none', 0)
    })
    // Without this listener Node answers `100 Continue` itself, before any rule has decided.
    s.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => accept(req, res, true))
    // A reverse proxy opens no CONNECT tunnels: answered (Node would close without a word) and counted.
    s.on('connect', (_req: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => socket.destroy()) // Node's own listener is gone once it hands the socket over
      metrics.response(405, 'none', 0)
      endWithProblem(
        socket,
        405,
        'The gateway does not open tunnels (CONNECT); it forwards requests to its upstream.',
      )
    })
    return s
  }
  // Node hands an upgrade over once read, answers to earlier requests on its connection maybe
  // still going out: it waits for them (`plain` cannot answer on the socket before they are
  // done either). A failure costs that connection, not the process.
  const owed = pendingResponses()
  const server = httpServer(owed.track)
  // With an 'upgrade' listener Node hands over every request with `Connection: upgrade`: the
  // other upgrades (h2c, …) are read again by `plain`, which has none, as the ordinary requests
  // they were without it. It listens nowhere: 'listening' starts Node's checks of its connections
  // (headers and request timeouts, closeIdleConnections).
  const plain = httpServer()
  plain.emit('listening')
  // Every upgrade's socket, from its upgrade to its close (tunnels included, and one still waiting
  // for the answers before it): Node's closeAllConnections no longer knows them.
  const upgrades = new Set<Duplex>()
  // The client sockets of open WebSocket tunnels: a reload gives them its websocketIdleTimeout.
  const tunnels = new Set<Duplex>()
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgrades.add(socket)
    socket.once('close', () => upgrades.delete(socket))
    owed.after(socket, () => {
      try {
        if (isWebSocket(req)) websocket(req, socket, head)
        else replayAsRequest(plain, req, socket, head)
      } catch (error) {
        log.error(
          { err: error instanceof Error ? error.message : String(error), path: req.url },
          'upgrade failed',
        )
        socket.destroy()
      }
    })
  })
  function websocket(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy()) // as for CONNECT
    const res = upgradeResponse(req, socket)
    if (!draining) new Handling(req, res, false, { socket, head }).run()
    else {
      // A tunnel opened now would be closed in a moment: the client is told to go elsewhere.
      sendProblem(res, 503, req.url ?? '/', 'The gateway is shutting down; connect again.')
      metrics.response(503, 'none', 0)
    }
  }
  opened.push(() => {
    plain.close()
    return new Promise((r) => server.close(r))
  })
  await starting(() => listen(server, options.port ?? 8080, options.host ?? '127.0.0.1'))

  // The digest of the text the last reload read (or why it could not): a watch-triggered reload
  // acts only on a new one.
  let lastSeen = digest(current.text)
  let reloading: Promise<ReloadResult> = Promise.resolve({
    ok: true,
    issues: [],
  })
  let watching: PolicyWatch | undefined
  function reload(reason = 'manual', onlyIfChanged = false): Promise<ReloadResult> {
    // An explicit reload also watches the file anew, whatever became of its folders.
    if (!onlyIfChanged && !draining) watching?.rearm()
    // A reload never rejects: one that throws is a failed reload, and the next one still runs.
    reloading = reloading.then(() => doReload(reason, onlyIfChanged)).catch((error) => failed(reason, error))
    return reloading
  }

  function failed(reason: string, error: unknown): ReloadResult {
    metrics.reload('failure')
    const message = error instanceof Error ? error.message : String(error)
    log.error(
      { reason, generation: current.id, err: message },
      `policy rejected (${message}); generation ${current.id} stays in force`,
    )
    return { ok: false, issues: [], error: message }
  }

  async function doReload(reason: string, onlyIfChanged: boolean): Promise<ReloadResult> {
    if (draining) return { ok: false, issues: [] }
    const source = readPolicySource(file, env)
    // A file that cannot be read is seen as its error: reported (and counted) once, as an invalid
    // text is; the watcher only reads a file that stayed so for a while (not one mid-replace).
    const unreadable = source.issues.find((i) => i.code === 'ERR_FILE')
    const seen = unreadable === undefined ? digest(source.text) : unreadable.message
    if (onlyIfChanged) {
      // Only a change of content counts: a text already tried (and rejected) is not tried again
      // on every event in the folder, which a log file there would turn into a loop.
      if (seen === lastSeen) return { ok: true, issues: [] }
      lastSeen = seen
      if (seen === digest(current.text)) return { ok: true, issues: [] }
    } else lastSeen = seen
    const { config, issues } = checkSource(source)
    if (config === undefined) {
      metrics.reload('failure')
      log.error(
        { reason, generation: current.id, issues: issues.map(formatIssue) },
        `policy rejected (${issues.length} problem${issues.length === 1 ? '' : 's'}); generation ${current.id} stays in force`,
      )
      return { ok: false, issues }
    }
    const old = current
    // Whatever the new policy opens is closed again if it cannot be put in force.
    let store = old.policy.store
    let upstream = old.upstream
    let policy: CompiledPolicy
    try {
      if (JSON.stringify(config.store) !== store.signature) {
        store = await openStore(config.store)
        opening.add(store)
        try {
          if (!draining) await store.ready(storeTimeoutMs)
        } catch (error) {
          if (!draining) throw new Error(`new store unreachable: ${(error as Error).message}`)
        }
        opening.delete(store)
      }
      // close() may have begun during a wait: what this reload opened is closed, not put in force.
      if (draining) throw STOPPING
      const upstreamConfig = await upstreamFor(config)
      if (draining) throw STOPPING
      if (JSON.stringify(upstreamConfig) !== old.upstream.signature) upstream = openUpstream(upstreamConfig)
      policy = compilePolicy(config, store, old.policy, sink, clock)
    } catch (error) {
      opening.delete(store)
      if (store !== old.policy.store) await store.close().catch(() => {})
      if (upstream !== old.upstream) await upstream.close().catch(() => {})
      if (error !== STOPPING) return failed(reason, error)
      log.info({ reason, generation: current.id }, 'reload abandoned: the gateway is stopping')
      return { ok: false, issues: [], error: 'the gateway is stopping' }
    }
    warnAbout(config, log)
    const next: Generation = {
      id: old.id + 1,
      policy,
      upstream,
      text: source.text,
      inFlight: 0,
      retired: false,
    }
    for (const resource of [store, upstream]) users.set(resource, (users.get(resource) ?? 0) + 1)
    current = next
    for (const s of [server, plain]) applyClientTimeouts(s, config.clients)
    for (const socket of tunnels) quietFor(socket, config.clients)
    old.retired = true
    if (old.inFlight === 0) release(old)
    const kept = [...policy.limiters.values()].filter((l) =>
      [...old.policy.limiters.values()].includes(l),
    ).length
    metrics.reload('success')
    metrics.generation.set(next.id)
    log.info(
      {
        reason,
        generation: next.id,
        rules: config.rules.map((r) => r.name),
        limitersKept: kept,
        limitersNew: policy.limiters.size - kept,
        storeKept: store === old.policy.store,
        upstreamKept: upstream === old.upstream,
      },
      'policy reloaded',
    )
    return { ok: true, issues: [] }
  }

  if (options.watch !== false) {
    const started = await starting(() =>
      watchPolicy({ file, log, changed: () => void reload('file changed', true) }),
    )
    watching = started
    opened.push(() => started.close())
  }

  const admin: AdminServer = await starting(() =>
    startAdmin({
      port: options.adminPort ?? 9090,
      host: options.adminHost ?? '127.0.0.1',
      metrics,
      log,
      token: () => options.adminToken ?? current.policy.config.admin.token,
      policy: () => current.policy,
      ready: () => ({
        ready: !draining,
        draining,
        generation: current.id,
        store: { type: current.policy.store.type, status: current.policy.store.status() },
        upstream: current.upstream.url.origin,
      }),
      reload: () => reload('admin API'),
    }),
  )

  let closing: Promise<void> | undefined
  async function close(): Promise<void> {
    draining = true
    const started = performance.now()
    const drainTimeoutMs = options.drainTimeoutMs ?? 30_000
    log.info({ inFlight, tunnels: metrics.tunnels }, 'draining')
    const stopped = new Promise<void>((r) => server.close(() => r()))
    server.closeIdleConnections()
    plain.closeIdleConnections()
    if (inFlight > 0) {
      const finished = await within(
        new Promise<void>((r) => {
          drained = r
        }),
        drainTimeoutMs,
      )
      if (!finished) log.warn({ inFlight }, 'drain timeout: closing connections with requests in flight')
    }
    server.closeAllConnections()
    plain.closeAllConnections()
    // WebSocket tunnels end with the drain: each side's connection closes (the client's socket
    // takes the upstream's with it).
    for (const socket of upgrades) socket.destroy()
    await stopped
    plain.close()
    watching?.close()
    // A store that hangs must not hold the exit: the final flush and the closes get what is left of
    // the drain timeout (at least FINAL_FLUSH_MS); counts not sent by then are logged, not waited for.
    const limiters = new Set([...current.policy.limiters.values(), ...retiring])
    const left = Math.max(drainTimeoutMs - (performance.now() - started), FINAL_FLUSH_MS)
    const deadline = performance.now() + left
    const flushed = await flushAll(limiters, left)
    if (flushed.unsent.length > 0) {
      log.warn(
        { rules: ruleNames(flushed.unsent), err: flushed.error ?? `no answer within ${Math.round(left)} ms` },
        'approximate counts not flushed',
      )
    }
    const resources = [...users.keys(), ...unused, ...opening]
    unused.clear()
    const closed = await within(
      Promise.allSettled(resources.map((r) => r.close())),
      Math.max(deadline - performance.now(), 0),
    )
    if (!closed) log.warn('closing the store or the upstream did not end in time')
    // A reload under way sees `draining` and closes what it opened: it ends before "stopped".
    if (!(await within(reloading, Math.max(deadline - performance.now(), 0)))) {
      log.warn('a reload under way did not end in time')
    }
    await demo?.close()
    await admin.close()
    log.info('stopped')
  }

  const port = (server.address() as AddressInfo).port
  return {
    port,
    adminPort: admin.port,
    get upstreamUrl() {
      return current.upstream.url.href.replace(/\/$/, '')
    },
    get demo() {
      return demo !== undefined && current.upstream.url.origin === new URL(demo.url).origin
    },
    get config() {
      return current.policy.config
    },
    get generation() {
      return current.id
    },
    metrics,
    reload: (reason) => reload(reason ?? 'manual'),
    close: () => {
      closing ??= close()
      return closing
    },
  }
}

/** Thrown inside a reload that finds the gateway stopping: what it opened is closed, nothing logged as a failure. */
const STOPPING = new Error('the gateway is stopping')

/** How long the final flush may take when the drain timeout is spent (or has less left). */
const FINAL_FLUSH_MS = 3_000

/**
 * Flushes the limiters' approximate counts, for at most `ms` when given: resolves the limiters
 * whose flush failed or had not ended by then, and the first error.
 */
async function flushAll(
  limiters: Iterable<Limiter>,
  ms?: number,
): Promise<{ unsent: Limiter[]; error: string | undefined }> {
  const left = new Set(limiters)
  let error: string | undefined
  const all = Promise.all(
    [...left].map((limiter) =>
      limiter.flush().then(
        () => void left.delete(limiter),
        (e: unknown) => {
          error ??= e instanceof Error ? e.message : String(e)
        },
      ),
    ),
  )
  await (ms === undefined ? all : within(all, ms))
  return { unsent: [...left], error }
}

/** The rule names (`<rule>` or `<rule>.<tier>`) of limiters, for logs. */
function ruleNames(limiters: readonly Limiter[]): string[] {
  return limiters.flatMap((l) => l.rules.map((r) => r.name))
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex')
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

function warnAbout(config: GatewayConfig, log: Logger): void {
  if (
    config.identity.secret === undefined &&
    config.rules.some((r) => r.key.some((p) => p.kind !== 'global'))
  ) {
    log.warn(
      'identity.secret is not set: client keys are hashed without a secret (set it from the environment)',
    )
  }
}
