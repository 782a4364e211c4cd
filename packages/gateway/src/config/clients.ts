import { describe } from '../library.js'
import type { Checker } from './checker.js'
import { timerDuration } from './timer.js'
import type { ClientsConfig } from './types.js'

/**
 * What a policy without `clients:` gets: Node's timeouts as the gateway set them before, no size
 * limit, and an hour for a quiet WebSocket (Envoy's TCP idle timeout; ADR 0012).
 */
export const CLIENT_DEFAULTS: ClientsConfig = {
  headersTimeoutMs: 66_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 65_000,
  maxBodySize: undefined,
  websocketIdleTimeoutMs: 3_600_000,
}

export const CLIENT_FIELDS = [
  'headersTimeout',
  'requestTimeout',
  'keepAliveTimeout',
  'maxBodySize',
  'websocketIdleTimeout',
]

const SIZE = /^(\d+)(b|kb|mb|gb)$/i
const UNITS: Readonly<Record<string, number>> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }

/**
 * Reads `clients:`, the limits the gateway holds clients to. `headersTimeout` defaults to
 * `requestTimeout` when that is shorter than 66 s (as Node's own default does); given longer
 * than `requestTimeout`, it is refused (Node refuses such a server).
 *
 * @example readClients(c, { requestTimeout: '30s', maxBodySize: '10mb' })
 */
export function readClients(c: Checker, value: unknown): ClientsConfig | undefined {
  if (value === undefined) return CLIENT_DEFAULTS
  if (!c.object(['clients'], value)) return undefined
  c.fields(['clients'], value, CLIENT_FIELDS)
  const timeout = (field: string, fallback: number): number | undefined => {
    if (value[field] === undefined) return fallback
    // Node arms each of them with a timer.
    return timerDuration(c, ['clients', field], value[field])
  }
  const requestTimeoutMs = timeout('requestTimeout', CLIENT_DEFAULTS.requestTimeoutMs)
  const headersTimeoutMs = timeout(
    'headersTimeout',
    Math.min(CLIENT_DEFAULTS.headersTimeoutMs, requestTimeoutMs ?? Number.POSITIVE_INFINITY),
  )
  const keepAliveTimeoutMs = timeout('keepAliveTimeout', CLIENT_DEFAULTS.keepAliveTimeoutMs)
  const websocketIdleTimeoutMs = timeout('websocketIdleTimeout', CLIENT_DEFAULTS.websocketIdleTimeoutMs)
  const maxBodySize = value.maxBodySize === undefined ? undefined : size(c, value.maxBodySize)
  if (
    headersTimeoutMs !== undefined &&
    requestTimeoutMs !== undefined &&
    headersTimeoutMs > requestTimeoutMs
  ) {
    c.add(
      ['clients', 'headersTimeout'],
      'ERR_RANGE',
      `expected at most requestTimeout (${String(value.requestTimeout ?? '300s')}): the headers are part of the request, got ${describe(value.headersTimeout)}`,
    )
    return undefined
  }
  if (
    requestTimeoutMs === undefined ||
    headersTimeoutMs === undefined ||
    keepAliveTimeoutMs === undefined ||
    websocketIdleTimeoutMs === undefined ||
    (value.maxBodySize !== undefined && maxBodySize === undefined)
  ) {
    return undefined
  }
  return { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxBodySize, websocketIdleTimeoutMs }
}

/** A size in bytes: whole bytes, or `"10mb"` (b, kb, mb, gb; 1 kb = 1024 bytes, any case). */
function size(c: Checker, value: unknown): number | undefined {
  const m = typeof value === 'string' ? SIZE.exec(value.trim()) : null
  const bytes = m ? Number(m[1]) * (UNITS[(m[2] as string).toLowerCase()] as number) : value
  if (typeof bytes === 'number' && Number.isSafeInteger(bytes) && bytes >= 1) return bytes
  // Well formed but too large to count in bytes exactly: no "expected a size like …" for it.
  if (typeof bytes === 'number' && bytes > Number.MAX_SAFE_INTEGER) {
    c.add(
      ['clients', 'maxBodySize'],
      'ERR_RANGE',
      `expected at most ${Number.MAX_SAFE_INTEGER} bytes (2^53 - 1; 8388607gb), got ${describe(value)}`,
    )
    return undefined
  }
  c.add(
    ['clients', 'maxBodySize'],
    'ERR_SIZE',
    `expected a size like "10mb" (b, kb, mb, gb; 1kb = 1024 bytes) or whole bytes from 1, got ${describe(value)}`,
  )
  return undefined
}
