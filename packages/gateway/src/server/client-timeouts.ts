import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { ClientsConfig } from '../config/types.js'

/**
 * How often Node checks its connections against `headersTimeout` and `requestTimeout` (its
 * default, 30 s, let a slow client stay up to 30 s past them). Set when a server is created.
 */
export const CONNECTIONS_CHECK_MS = 1_000

/**
 * Puts `clients:` timeouts in force on a server; Node reads them as it goes, so a reload applies
 * them to running connections: the header and request timeouts at the next check, the keep-alive
 * timeout when a connection next falls idle.
 *
 * @example applyClientTimeouts(server, config.clients)
 */
export function applyClientTimeouts(server: Server, clients: ClientsConfig): void {
  server.headersTimeout = clients.headersTimeoutMs
  server.requestTimeout = clients.requestTimeoutMs
  server.keepAliveTimeout = clients.keepAliveTimeoutMs
}

/**
 * Arms a WebSocket tunnel's `clients.websocketIdleTimeout` on its client socket, which emits
 * 'timeout' once that long has passed without a byte either way: Node restarts a socket's timer
 * at every read and write, and this socket carries both directions. Armed again (a reload), the
 * new timeout counts from then.
 *
 * @example socket.once('timeout', () => socket.destroy()); quietFor(socket, config.clients)
 */
export function quietFor(socket: Duplex, clients: ClientsConfig): void {
  ;(socket as Socket).setTimeout(clients.websocketIdleTimeoutMs)
}
