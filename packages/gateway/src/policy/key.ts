import { createHash, createHmac } from 'node:crypto'
import type { KeyPart } from '../config/types.js'
import { type ClientKeyOptions, resolveClientIp, subnetKey } from '../library.js'
import { type Memo, memo } from './memo.js'
import type { RequestInfo } from './request.js'

/** A request's key for one rule. */
export interface RuleKey {
  /** What the store sees: a hash of the parts, never a raw address or API key. */
  readonly key: string
  /** The parts' raw values joined with `|` (for `tiers.keys`); `''` when the rule fell back to the address. */
  readonly raw: string
}

/** Per-request memo of the client address, shared by every rule. */
export interface KeyContext {
  client?: string
}

/** Hashes key descriptors: HMAC-SHA-256 under the identity secret (SHA-256 without one), cached. */
export interface Hasher {
  hash(descriptor: string): string
}

/**
 * `cache` holds the hashes of short descriptors only (see `memo`): a long header or query value
 * is hashed on every request, so a flood of distinct long keys costs hashing, not memory.
 *
 * @example createHasher('s3cret').hash('ip=203.0.113.9') // 43 base64url characters
 */
export function createHasher(secret: string | undefined, cache: Memo<string> = memo()): Hasher {
  return {
    hash(descriptor) {
      let key = cache.get(descriptor)
      if (key === undefined) {
        const h = secret === undefined ? createHash('sha256') : createHmac('sha256', secret)
        key = h.update(descriptor).digest('base64url')
        cache.set(descriptor, key)
      }
      return key
    },
  }
}

/** A header as the direct peer sent it, where the request tells (`RequestInfo.sent`). */
function sentHeader(request: RequestInfo, name: string): string | undefined {
  return request.sent === undefined ? request.header(name) : request.sent(name)
}

/** Resolves client addresses (subnet-grouped, or the fallback), cached by what they depend on. */
export type ClientResolver = (request: RequestInfo, context: KeyContext) => string

/**
 * Whether `identity` trusts any peer (trusted proxies, a hop count, or the platform): without,
 * the client is the peer and no forwarding header counts.
 *
 * @example trustsSomePeer({ trustedProxies: ['10.0.0.0/8'] }) // true
 */
export function trustsSomePeer(identity: ClientKeyOptions): boolean {
  const { trustedProxies, trustPlatform } = identity
  return (
    trustPlatform === true ||
    (typeof trustedProxies === 'number' ? trustedProxies > 0 : (trustedProxies?.length ?? 0) > 0)
  )
}

/**
 * `cache` is keyed by the peer and the forwarding header; a long header (a client's padded
 * X-Forwarded-For) is resolved on every request and never held (see `memo`).
 *
 * @example const clientOf = createClientResolver({ trustedProxies: ['10.0.0.0/8'] })
 */
export function createClientResolver(
  identity: ClientKeyOptions,
  cache: Memo<string> = memo(),
): ClientResolver {
  // Without trusted proxies the address depends on the peer alone; with them, on the header too.
  const header = trustsSomePeer(identity) ? (identity.header ?? 'x-forwarded-for').toLowerCase() : undefined
  return (request, context) => {
    if (context.client !== undefined) return context.client
    // Identity reads the forwarding header as the peer sent it (`sent`), not as the gateway passes
    // it on: it applies its own trust, and a hop count counts no hop of the gateway's.
    const id =
      header === undefined
        ? (request.peer ?? '')
        : `${request.peer ?? ''}\n${sentHeader(request, header) ?? ''}`
    let client = cache.get(id)
    if (client === undefined) {
      const input =
        request.sent === undefined
          ? request
          : { peer: request.peer, header: (name: string) => sentHeader(request, name) }
      const { ip } = resolveClientIp(input, identity)
      client =
        ip === undefined ? (identity.fallback ?? 'unknown-client') : (subnetKey(ip, identity) as string)
      cache.set(id, client)
    }
    context.client = client
    return client
  }
}

function queryValue(query: string, name: string): string | undefined {
  if (query === '') return undefined
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=')
    const k = eq === -1 ? pair : pair.slice(0, eq)
    if (safeDecode(k) === name) return safeDecode(eq === -1 ? '' : pair.slice(eq + 1))
  }
  return undefined
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return text
  }
}

/**
 * Compiles a rule's key. Each part contributes `name=value` to a descriptor that is then hashed,
 * so parts never collide. A missing header or query parameter makes the rule fall back to the
 * client address (as the library's key functions do), in a namespace of its own.
 *
 * @example compileKey([{ kind: 'header', name: 'x-api-key' }], createClientResolver(identity), hasher)
 */
export function compileKey(
  parts: readonly KeyPart[],
  clientOf: ClientResolver,
  hasher: Hasher,
): (request: RequestInfo, route: string, context: KeyContext) => RuleKey {
  // The commonest key, the client address alone: one lookup per request once a client is known.
  if (parts.length === 1 && parts[0]?.kind === 'ip') {
    const byClient = memo<RuleKey>()
    return (request, _route, context) => {
      const client = clientOf(request, context)
      let key = byClient.get(client)
      if (key === undefined) {
        key = { key: hasher.hash(`ip=${encodeURIComponent(client)}`), raw: client }
        byClient.set(client, key)
      }
      return key
    }
  }
  return (request, route, context) => {
    let descriptor = ''
    const values: string[] = []
    for (const part of parts) {
      let value: string | undefined
      switch (part.kind) {
        case 'ip':
          value = clientOf(request, context)
          break
        case 'header':
          value = request.header(part.name)
          break
        case 'query':
          value = queryValue(request.query, part.name)
          break
        case 'route':
          value = route
          break
        case 'path':
          value = request.routePath
          break
        case 'method':
          value = request.method
          break
        case 'host':
          value = request.host
          break
        case 'global':
          value = '*'
          break
      }
      if (value === undefined || value === '') {
        return { key: hasher.hash(`fallback|ip=${clientOf(request, context)}`), raw: '' }
      }
      const name = part.kind === 'header' || part.kind === 'query' ? `${part.kind}:${part.name}` : part.kind
      descriptor += `${descriptor === '' ? '' : '|'}${name}=${encodeURIComponent(value)}`
      values.push(value)
    }
    return { key: hasher.hash(descriptor), raw: values.join('|') }
  }
}
