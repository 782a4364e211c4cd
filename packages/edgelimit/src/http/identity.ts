import { ConfigError, type ConfigIssue } from '../errors.js'
import { remember } from '../remember.js'
import { createIssues } from '../validate.js'
import { base64 } from './headers.js'
import {
  type Cidr,
  formatIp,
  inNetwork,
  type ParsedIp,
  parseCidr,
  parseIp,
  type SubnetOptions,
  subnetText,
} from './ip.js'

/** Headers that carry the client address; any other name is read as a single address. */
export type ClientIpHeader =
  | 'x-forwarded-for'
  | 'forwarded'
  | 'cf-connecting-ip'
  | 'fastly-client-ip'
  | 'x-real-ip'
  | 'true-client-ip'
  | (string & {})

/** What an adapter knows about a request's origin. */
export interface ClientIpInput {
  /** The direct socket address; absent on edge runtimes that do not expose one. */
  peer?: string | undefined
  /** Reads a request header (lowercase name); multiple lines joined with `, ` as `Headers` does. */
  header(name: string): string | null | undefined
}

/** Whom to believe about the client address. Create it once: it is validated once per object. */
export interface ClientIpOptions {
  /**
   * CIDRs of your own reverse proxies (`[...PRIVATE, '203.0.113.0/24']`, or one as a string:
   * `'10.0.0.0/8'`; CDN ranges are yours to supply): headers count only when the direct peer is
   * inside one, and chains are read right to left skipping these; single-value headers are then
   * taken as-is. Or a hop count N: the client is the Nth address from the right of the
   * X-Forwarded-For/Forwarded chain, the direct peer being the first proxy. Without it, the peer
   * is the client and headers are ignored, so a forged header is keyed by the sender's real
   * address. A trusted peer that sends no such header made the request itself (a health check):
   * it is the client, as with express's `trust proxy` and nginx's realip.
   */
  trustedProxies?: readonly string[] | string | number
  /**
   * The header holding the client address. `x-forwarded-for` and `forwarded` are chains; others
   * (`cf-connecting-ip`, …) are a single address taken as-is from a trusted peer.
   * @default 'x-forwarded-for'
   */
  header?: ClientIpHeader
  /**
   * Trust the header without checking the peer, because the platform sets it and clients cannot
   * reach you any other way. Cloudflare Workers: `{ header: 'cf-connecting-ip', trustPlatform:
   * true }`; Vercel Edge, which sets X-Forwarded-For to the client: `{ header: 'x-forwarded-for',
   * trustPlatform: true }`.
   * @default false
   */
  trustPlatform?: boolean
}

/**
 * The resolved client address, or why there is none (the caller then uses a fallback key):
 * `missing` or `malformed` peer, or a forwarding header that is there but unreadable.
 */
export interface ClientIpResult {
  /** Canonical text (see `formatIp`), IPv4-mapped IPv6 shown as IPv4. */
  ip: string | undefined
  source: 'peer' | 'header'
  reason?: 'missing' | 'malformed'
}

/** Options of `clientKey`: whom to trust, how much of the address counts, how to hash it. */
export interface ClientKeyOptions extends ClientIpOptions, SubnetOptions {
  /** HMAC secret for `hashKey`; strongly recommended (see there). */
  secret?: string
  /**
   * The key used when no address can be resolved: every such request shares it.
   * @default 'unknown-client'
   */
  fallback?: string
}

/** A client's rate-limit key; `fallback` is true (with a `reason`) when no address was found. */
export interface ClientKey {
  key: string
  ip?: string
  fallback: boolean
  reason?: 'missing' | 'malformed'
}

/** Client identity options in the form requests are resolved with (see `compileIdentity`). */
export interface CompiledIdentity {
  readonly trusted: readonly Cidr[]
  readonly hops: number
  readonly header: string
  /** Splits the header into its entries, left to right; undefined: one address, not a chain. */
  readonly chain: ((raw: string) => (string | undefined)[]) | undefined
  readonly platform: boolean
}

const compiledOptions = new WeakMap<object, CompiledIdentity>()
const NO_OPTIONS: ClientKeyOptions = /* @__PURE__ */ Object.freeze({})

/** What a trusted proxy or an allowList entry must be: `expected …` in the option's issue. */
export const CIDR_OR_ADDRESS = 'a CIDR like "10.0.0.0/8" or "2001:db8::/32", or an address'

/**
 * Lists every problem in client identity options, with its path (an unknown option name too:
 * `ERR_UNKNOWN_OPTION`); empty when they are valid.
 *
 * @example validateClientKeyOptions({ trustedProxies: ['10.0.0.0/33'] }, 'identity')
 * // [{ path: 'identity.trustedProxies[0]', code: 'ERR_CIDR', message: 'expected a CIDR …' }]
 */
export function validateClientKeyOptions(options: unknown, path?: string): ConfigIssue[] {
  const issues = createIssues()
  const at = (name: string) => (path === undefined ? name : `${path}.${name}`)
  if (
    !issues.object(
      path ?? 'options',
      options,
      'trustedProxies header trustPlatform ipv6Prefix ipv4Prefix secret fallback',
    )
  )
    return issues.list
  const { trustedProxies, header, ipv6Prefix, ipv4Prefix } = options
  if (Array.isArray(trustedProxies)) {
    trustedProxies.forEach((cidr, i) => {
      issues.expect(
        at(`trustedProxies[${i}]`),
        cidr,
        parseCidr(cidr) !== undefined,
        'ERR_CIDR',
        CIDR_OR_ADDRESS,
      )
    })
  } else if (typeof trustedProxies === 'string')
    issues.expect(
      at('trustedProxies'),
      trustedProxies,
      parseCidr(trustedProxies) !== undefined,
      'ERR_CIDR',
      CIDR_OR_ADDRESS,
    )
  else if (trustedProxies !== undefined) issues.integer(at('trustedProxies'), trustedProxies, 0, 64)
  if (header !== undefined)
    issues.expect(
      at('header'),
      header,
      typeof header === 'string' && /^[!#$%&'*+.^_`|~0-9a-z-]+$/i.test(header),
      'ERR_HEADER',
      'a header name like "x-forwarded-for"',
    )
  issues.boolean(at('trustPlatform'), options.trustPlatform)
  if (ipv6Prefix !== undefined) issues.integer(at('ipv6Prefix'), ipv6Prefix, 0, 128)
  if (ipv4Prefix !== undefined) issues.integer(at('ipv4Prefix'), ipv4Prefix, 0, 32)
  issues.string(at('secret'), options.secret)
  issues.string(at('fallback'), options.fallback)
  return issues.list
}

/** Valid options (see `validateClientKeyOptions`) in the form requests are resolved with. */
export function compileIdentity(options: ClientIpOptions): CompiledIdentity {
  const { trustedProxies = [] } = options
  const header = (options.header ?? 'x-forwarded-for').toLowerCase()
  return {
    trusted: typeof trustedProxies === 'number' ? [] : ([trustedProxies].flat().map(parseCidr) as Cidr[]),
    hops: typeof trustedProxies === 'number' ? trustedProxies : 0,
    header,
    chain: header === 'x-forwarded-for' ? xffEntries : header === 'forwarded' ? forwardedFor : undefined,
    platform: options.trustPlatform === true,
  }
}

// Validated and compiled once per options object.
function compile(options: ClientKeyOptions): CompiledIdentity {
  let compiled = compiledOptions.get(options)
  if (compiled === undefined) {
    const issues = validateClientKeyOptions(options)
    if (issues.length > 0) throw new ConfigError(issues)
    compiled = compileIdentity(options)
    compiledOptions.set(options, compiled)
  }
  return compiled
}

// Splits on `separator` outside quoted strings (which may contain escaped quotes); undefined when
// the text ends inside a quote: that quote, opened by whoever wrote the left part, must not swallow
// the separators a trusted proxy appended after it.
function splitOutsideQuotes(text: string, separator: string): string[] | undefined {
  const parts: string[] = []
  let quoted = false
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (quoted && ch === '\\') i++
    else if (ch === '"') quoted = !quoted
    else if (!quoted && ch === separator) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return quoted ? undefined : parts
}

const QUOTED = /^"((?:[^"\\]|\\.)*)"$/

// The `for=` value of each RFC 7239 element, undefined where it is absent, repeated or unparsable.
// With an unclosed quote the elements are split at every comma (no `for=` value holds one), so
// the ones proxies appended on the right stay whole; an element with an unclosed quote has none.
function forwardedFor(value: string): (string | undefined)[] {
  const out: (string | undefined)[] = []
  for (const element of splitOutsideQuotes(value, ',') ?? value.split(',')) {
    if (element.trim() === '') continue
    let found: string | undefined
    let valid = true
    for (const pair of splitOutsideQuotes(element, ';') ?? []) {
      const eq = pair.indexOf('=')
      if (eq === -1 || pair.slice(0, eq).trim().toLowerCase() !== 'for') continue
      const raw = pair.slice(eq + 1).trim()
      const quoted = QUOTED.exec(raw)
      const text = quoted === null ? raw : (quoted[1] as string).replace(/\\(.)/g, '$1')
      if (found !== undefined || (quoted === null && raw.includes('"'))) valid = false
      found = text
    }
    out.push(valid ? found : undefined)
  }
  return out
}

// The entries of an X-Forwarded-For value, left to right, empty ones dropped.
function xffEntries(raw: string): string[] {
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
}

// The address found at `source`, or none, for `reason`.
const result = (
  ip: ParsedIp | undefined,
  source: 'peer' | 'header',
  reason: 'missing' | 'malformed',
): ClientIpResult => (ip === undefined ? { ip, source, reason } : { ip: formatIp(ip), source })

function fromHeader(raw: string, c: CompiledIdentity): ClientIpResult {
  const entries = c.chain === undefined ? [raw] : c.chain(raw)
  let client: ParsedIp | undefined
  // With a hop count, the entry that many from the right (fewer entries than hops: the left-most
  // one, still written by a trusted proxy); `trusted` is then empty, so the walk stops there.
  // Without, the right-most. (No entries: `entries[0]` is none, malformed.)
  for (let i = Math.max(0, entries.length - (c.hops || 1)); i >= 0; i--) {
    // `unknown`, obfuscated identifiers and garbage stop the walk: nothing left of them is vouched for.
    client = parseIp(entries[i] as string)
    if (client === undefined || !c.trusted.some((cidr) => inNetwork(client as ParsedIp, cidr))) break
  }
  // No entries, or garbage where the client is: malformed. Every entry trusted: the request
  // started inside your network, at the left-most hop.
  return result(client, 'header', 'malformed')
}

/**
 * Finds the client address of a request. Headers are believed only from a trusted peer (or with
 * a hop count, or `trustPlatform`); chains use the right-most-untrusted rule, so a client cannot
 * choose its own key by forging X-Forwarded-For, Forwarded or CF-Connecting-IP. A missing or
 * malformed address gives `ip: undefined` and a `reason`; never throws for any request.
 *
 * @throws {ConfigError} when `options` are invalid (checked once per options object).
 * @example
 * const options = { trustedProxies: ['10.0.0.0/8'] }
 * resolveClientIp({ peer: '10.0.0.2', header: (n) => req.headers.get(n) }, options)
 * // { ip: '203.0.113.7', source: 'header' } for X-Forwarded-For: 203.0.113.7, 10.0.0.9
 */
export function resolveClientIp(input: ClientIpInput, options: ClientIpOptions = NO_OPTIONS): ClientIpResult {
  return resolveWith(input, compile(options))
}

/** `resolveClientIp` with options compiled by `compileIdentity` (the HTTP layer's, once). */
export function resolveWith(input: ClientIpInput, c: CompiledIdentity): ClientIpResult {
  const text = typeof input.peer === 'string' ? input.peer.trim() : ''
  const peer = parseIp(text)
  if (c.hops > 0 || c.platform || (peer !== undefined && c.trusted.some((cidr) => inNetwork(peer, cidr)))) {
    const raw = input.header(c.header)
    // No forwarding header: the proxy sent the request itself (a health check), so it is the
    // client, as with express's `trust proxy` and nginx's realip.
    if (typeof raw === 'string' && raw.trim() !== '') return fromHeader(raw, c)
  }
  return result(peer, 'peer', text === '' ? 'missing' : 'malformed')
}

/**
 * Whether a direct peer is one of your proxies under `options` — what `resolveClientIp` checks
 * before it believes a header: a hop count or `trustPlatform` trusts every peer, a CIDR list the
 * peers inside it. A proxy built on edgelimit passes on a peer's own forwarding headers only then.
 *
 * @throws {ConfigError} when `options` are invalid (checked once per options object).
 * @example isTrustedPeer('10.0.0.2', { trustedProxies: ['10.0.0.0/8'] }) // true
 */
export function isTrustedPeer(peer: string | undefined, options: ClientIpOptions = NO_OPTIONS): boolean {
  const c = compile(options)
  if (c.hops > 0 || c.platform) return true
  const ip = typeof peer === 'string' ? parseIp(peer.trim()) : undefined
  return ip !== undefined && c.trusted.some((cidr) => inNetwork(ip, cidr))
}

const encoder = new TextEncoder()
const hmacKeys = new Map<string, Promise<CryptoKey>>()

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = hmacKeys.get(secret)
  if (key === undefined) {
    key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
      'sign',
    ])
    key.catch(() => hmacKeys.delete(secret))
    // Secrets are few; the bound (16) only stops a caller passing a fresh secret per request from leaking.
    remember(hmacKeys, secret, key, 16)
  }
  return key
}

/**
 * HMAC-SHA-256 of `value` under `secret`, or plain SHA-256 without; `secret` is not checked here
 * (`hashKey` and `partitionKeyBytes` check theirs, the HTTP layer its own once, with its options).
 */
export async function digest(value: string, secret: string | undefined): Promise<Uint8Array> {
  const data = encoder.encode(value)
  if (secret === undefined) return new Uint8Array(await crypto.subtle.digest('SHA-256', data))
  return new Uint8Array(await crypto.subtle.sign('HMAC', await hmacKey(secret), data))
}

// Called where a key is about to be hashed: an issue list per call costs nothing there.
function checkSecret(secret: string | undefined): void {
  const issues = createIssues()
  if (!issues.string('secret', secret)) throw new ConfigError(issues.list)
}

/** base64url without padding (RFC 4648 §5). */
export function base64url(bytes: Uint8Array): string {
  return base64(bytes).replace(/=/g, '').replace(/\+/g, '-').replace(/\//g, '_')
}

/**
 * Hashes a client id for use in store keys: HMAC-SHA-256 with `secret`, or plain SHA-256
 * without, as unpadded base64url (43 characters). Use a secret: the IPv4 space is small enough
 * that anyone who sees a store key can recover a plain-hashed address by trying all of them.
 *
 * @throws {ConfigError} (as a rejection) when `secret` is an empty string.
 * @example await hashKey('203.0.113.5', env.KEY_SECRET) // 'q1Yx…' (43 chars)
 */
export async function hashKey(value: string, secret?: string): Promise<string> {
  checkSecret(secret)
  return base64url(await digest(value, secret))
}

/**
 * The first 16 bytes of the same digest as `hashKey`, for the `pk` parameter of the
 * RateLimit-Policy header (a byte sequence that identifies the partition, never the raw key).
 *
 * @example await partitionKeyBytes('203.0.113.5', env.KEY_SECRET) // Uint8Array(16)
 */
export async function partitionKeyBytes(value: string, secret?: string): Promise<Uint8Array> {
  checkSecret(secret)
  return (await digest(value, secret)).slice(0, 16)
}

/**
 * Resolves the client address, reduces it to its subnet (IPv6 /64 by default) and hashes it.
 * Requests without a usable address share `fallback`, flagged so the caller can count them.
 *
 * @throws {ConfigError} when `options` are invalid.
 * @example
 * const options = { trustedProxies: PRIVATE, secret: env.KEY_SECRET }
 * const { key, fallback } = await clientKey({ peer, header: (n) => request.headers.get(n) }, options)
 */
export async function clientKey(
  input: ClientIpInput,
  options: ClientKeyOptions = NO_OPTIONS,
): Promise<ClientKey> {
  const resolved = resolveClientIp(input, options)
  if (resolved.ip === undefined) {
    return { key: options.fallback ?? 'unknown-client', fallback: true, reason: resolved.reason ?? 'missing' }
  }
  // `options` were checked above, by `resolveClientIp`.
  const address = parseIp(resolved.ip) as ParsedIp
  const subnet = subnetText(
    address,
    address.version === 4 ? (options.ipv4Prefix ?? 32) : (options.ipv6Prefix ?? 64),
  )
  return { key: await hashKey(subnet, options.secret), ip: resolved.ip, fallback: false }
}
