import type { Logger } from 'pino'
import { within } from '../library.js'
import type { AdminServer } from './admin.js'
import type { DemoOrigin } from './demo-origin.js'
import { flushAll, ruleNames } from './flush.js'
import type { Generations } from './generation.js'
import type { Metrics } from './metrics.js'
import type { ProxyServer } from './proxy-server.js'
import type { Reloader } from './reload.js'

/** What a gateway's shutdown stops. */
export interface ShutdownParts {
  readonly proxy: ProxyServer
  readonly generations: Generations
  readonly reloader: Reloader
  readonly admin: AdminServer
  /** The demo origin, if one was started. */
  readonly demo: () => DemoOrigin | undefined
  readonly metrics: Metrics
  readonly log: Logger
  readonly drainTimeoutMs: number
}

/**
 * Stops accepting, drains requests in flight (up to the drain timeout), flushes approximate
 * counts (for what is left of it, at least 3 s), then closes everything, a reload under way
 * included. Never waits on a store that does not answer.
 *
 * @example await shutdown({ proxy, generations, reloader, admin, demo: () => demo, metrics, log, drainTimeoutMs: 30_000 })
 */
export async function shutdown(parts: ShutdownParts): Promise<void> {
  const { proxy, generations, reloader, admin, metrics, log, drainTimeoutMs } = parts
  const { server, plain, upgrades } = proxy
  const { users, unused, opening, retiring } = generations
  const started = performance.now()
  proxy.drain(started + drainTimeoutMs)
  log.info({ inFlight: proxy.inFlight, tunnels: metrics.tunnels }, 'draining')
  const stopped = new Promise<void>((r) => server.close(() => r()))
  server.closeIdleConnections()
  plain.closeIdleConnections()
  if (proxy.inFlight > 0) {
    const finished = await within(proxy.drained(), drainTimeoutMs)
    if (!finished)
      log.warn({ inFlight: proxy.inFlight }, 'drain timeout: closing connections with requests in flight')
  }
  server.closeAllConnections()
  plain.closeAllConnections()
  // WebSocket tunnels end with the drain: each side's connection closes (the client's socket
  // takes the upstream's with it).
  for (const socket of upgrades) socket.destroy()
  await stopped
  plain.close()
  reloader.watching?.close()
  // A store that hangs must not hold the exit: the final flush and the closes get what is left of
  // the drain timeout (at least FINAL_FLUSH_MS); counts not sent by then are logged, not waited for.
  const limiters = new Set([...proxy.current.policy.limiters.values(), ...retiring])
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
  if (!(await within(reloader.reloading, Math.max(deadline - performance.now(), 0)))) {
    log.warn('a reload under way did not end in time')
  }
  await parts.demo()?.close()
  await admin.close()
  // The last second's upstream failures not logged: its timer would fire after "stopped", or never.
  proxy.flushUpstreamLog()
  log.info('stopped')
}

/** How long the final flush may take when the drain timeout is spent (or has less left). */
const FINAL_FLUSH_MS = 3_000
