import { ConfigError } from '../errors.js'
import { createIssues, type Issues } from '../validate.js'

/** A parsed IP address: 4 bytes for IPv4, 16 for IPv6. IPv4-mapped IPv6 is always IPv4. */
export interface ParsedIp {
  readonly version: 4 | 6
  readonly bytes: Uint8Array
}

/** A network: address bytes with every bit after `prefix` cleared. */
export interface Cidr extends ParsedIp {
  readonly prefix: number
}

/** How much of an address identifies one client. */
export interface SubnetOptions {
  /**
   * Leading bits of an IPv6 address kept: one /64 is usually one subscriber, who can rotate
   * through its 2^64 addresses at will.
   * @default 64
   */
  ipv6Prefix?: number
  /**
   * Leading bits of an IPv4 address kept.
   * @default 32
   */
  ipv4Prefix?: number
}

/**
 * Loopback networks, ready for `trustedProxies`.
 *
 * @example resolveClientIp(input, { trustedProxies: [...LOOPBACK, ...PRIVATE] })
 */
export const LOOPBACK: readonly string[] = /* @__PURE__ */ Object.freeze(['127.0.0.0/8', '::1/128'])

/**
 * Private (RFC 1918, RFC 4193 unique-local) and link-local networks, ready for `trustedProxies`.
 * CDN ranges (Cloudflare, Fastly, …) change over time and are yours to supply: edgelimit never
 * fetches them.
 *
 * @example resolveClientIp(input, { trustedProxies: [...PRIVATE, ...myCloudflareRanges] })
 */
export const PRIVATE: readonly string[] = /* @__PURE__ */ Object.freeze([
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '169.254.0.0/16',
  'fc00::/7',
  'fe80::/10',
])

// Longest accepted input: a bracketed IPv6 with embedded IPv4, a zone id and a port fits easily.
const MAX_TEXT = 128
// Decimal octets and prefix lengths; leading zeros are rejected: some stacks read `010` as octal 8.
const DECIMAL = /^(?:0|[1-9]\d{0,2})$/
const HEX_GROUP = /^[0-9a-f]{1,4}$/i
const ZONED = /^([^%]*)(?:%[\w.~-]+)?$/
// A bracketed IPv6 host or a host without a colon (IPv4: no IPv6 text has a single colon), and a
// port: digits, or obfuscated as a `Forwarded` node may have it (RFC 7239 §6.3: `_abc`).
const HOST_PORT = /^(?:\[([^\]]+)\]|([^:]*))(?::(\d{1,5}|_[\w.-]+))?$/

function parseV4(text: string): Uint8Array | undefined {
  const parts = text.split('.')
  if (parts.length !== 4) return undefined
  const bytes = new Uint8Array(4)
  for (let i = 0; i < 4; i++) {
    const part = parts[i] as string
    if (!DECIMAL.test(part) || Number(part) > 255) return undefined
    bytes[i] = Number(part)
  }
  return bytes
}

function parseV6(text: string): Uint8Array | undefined {
  // An embedded IPv4 address may only be the last group: it stands in for two zero groups here.
  const colon = text.lastIndexOf(':')
  const v4 = text.includes('.') ? parseV4(text.slice(colon + 1)) : undefined
  const halves = (v4 ? `${text.slice(0, colon + 1)}0:0` : text).split('::')
  const split = (half: string | undefined) => (half ? half.split(':') : [])
  const left = split(halves[0])
  const right = split(halves[1])
  // No need to bound the length first: past 45 characters the groups cannot add up.
  const gap = 8 - left.length - right.length
  // Without `::` the groups are all there; with it, it stands for at least one.
  if (halves.length > 2 || (halves.length < 2 ? gap !== 0 : gap < 1)) return undefined
  const bytes = new Uint8Array(16)
  for (let i = 0; i < 8; i++) {
    // Group i is on the left, in the gap (zero) or on the right.
    const group = i < left.length ? left[i] : i < 8 - right.length ? undefined : right[i + right.length - 8]
    if (group === undefined) continue
    if (!HEX_GROUP.test(group)) return undefined
    const word = parseInt(group, 16)
    bytes[2 * i] = word >> 8
    bytes[2 * i + 1] = word
  }
  if (v4) bytes.set(v4, 12)
  return bytes
}

function isMapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false
  return bytes[10] === 0xff && bytes[11] === 0xff
}

// A bare address (no brackets, port or zone); IPv4-mapped IPv6 stays IPv6 here.
function parseBare(text: string): ParsedIp | undefined {
  const v6 = text.includes(':')
  const bytes = v6 ? parseV6(text) : parseV4(text)
  return bytes && { version: v6 ? 6 : 4, bytes }
}

// An IPv6 address with an optional zone id (`fe80::1%eth0`); IPv4-mapped IPv6 becomes IPv4.
function parseV6WithZone(text: string): ParsedIp | undefined {
  const bytes = parseV6(ZONED.exec(text)?.[1] ?? '')
  return bytes && (isMapped(bytes) ? { version: 4, bytes: bytes.slice(12) } : { version: 6, bytes })
}

/**
 * Parses an IP address in any textual form a socket, proxy or header produces: `1.2.3.4`,
 * `1.2.3.4:8080`, `2001:db8::1`, `::`, `::ffff:1.2.3.4`, `fe80::1%eth0`, `[2001:db8::1]:443`,
 * `[2001:db8::1]:_abc` (an obfuscated port, RFC 7239 §6.3).
 * Zone ids and ports are dropped and IPv4-mapped IPv6 becomes IPv4. Returns `undefined` for
 * anything malformed (including octets with leading zeros); never throws.
 *
 * @example parseIp('[::ffff:192.0.2.1]:443') // { version: 4, bytes: Uint8Array [192, 0, 2, 1] }
 */
export function parseIp(text: string): ParsedIp | undefined {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return undefined
  const s = text.trim()
  if (!s.includes(':')) return parseBare(s)
  const host = HOST_PORT.exec(s)
  if (host === null) return parseV6WithZone(s)
  // Number(undefined), no port, is NaN.
  if (Number(host[3]) > 65_535) return undefined
  return host[1] ? parseV6WithZone(host[1]) : parseBare(host[2] as string)
}

/**
 * Formats an address canonically: dotted quad for IPv4, RFC 5952 for IPv6 (lowercase, no
 * leading zeros, the longest run of zero groups shortened to `::`).
 *
 * @example formatIp(parseIp('2001:DB8:0:0:0:0:0:1')!) // '2001:db8::1'
 */
export function formatIp(ip: ParsedIp): string {
  const b = ip.bytes
  if (ip.version === 4) return b.join('.')
  if (isMapped(b)) return `::ffff:${b.subarray(12).join('.')}`
  const words: string[] = []
  // The longest run of two or more zero groups (the first of equals) becomes `::`.
  let start = 0
  let length = 1
  for (let i = 0, run = 0; i < 8; i++) {
    const word = ((b[2 * i] as number) << 8) | (b[2 * i + 1] as number)
    words.push(word.toString(16))
    run = word === 0 ? run + 1 : 0
    if (run > length) {
      start = i + 1 - run
      length = run
    }
  }
  if (length < 2) return words.join(':')
  return `${words.slice(0, start).join(':')}::${words.slice(start + length).join(':')}`
}

/**
 * Parses and reformats an address in one step; `undefined` when it does not parse.
 *
 * @example normalizeIp('::FFFF:10.0.0.1') // '10.0.0.1'
 */
export function normalizeIp(text: string): string | undefined {
  const ip = parseIp(text)
  return ip && formatIp(ip)
}

function mask(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = bytes.slice()
  for (let i = 0; i < out.length; i++)
    out[i] = (out[i] as number) & (0xff << (8 - Math.min(8, Math.max(0, prefix - 8 * i))))
  return out
}

/**
 * Parses a network such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a single-host
 * network (/32 or /128). Host bits are cleared; `::ffff:0:0/96`-style IPv4-mapped networks
 * become IPv4 networks. Returns `undefined` for anything malformed.
 *
 * @example parseCidr('2001:db8::/32') // { version: 6, bytes: …, prefix: 32 }
 */
export function parseCidr(text: string): Cidr | undefined {
  if (typeof text !== 'string' || text.length > MAX_TEXT) return undefined
  const [address = '', prefixText, extra] = text.trim().split('/')
  if (extra !== undefined || (prefixText !== undefined && !DECIMAL.test(prefixText))) return undefined
  const ip = parseBare(address)
  if (ip === undefined) return undefined
  const bits = ip.bytes.length * 8
  let prefix = Number(prefixText ?? bits)
  if (prefix > bits) return undefined
  let { version, bytes } = ip
  if (version === 6 && isMapped(bytes) && prefix >= 96)
    [version, bytes, prefix] = [4, bytes.slice(12), prefix - 96]
  return { version, bytes: mask(bytes, prefix), prefix }
}

/**
 * Formats a network as `address/prefix`.
 *
 * @example formatCidr(parseCidr('10.1.2.3/8')!) // '10.0.0.0/8'
 */
export function formatCidr(cidr: Cidr): string {
  return `${formatIp(cidr)}/${cidr.prefix}`
}

/**
 * Whether `ip` lies inside `cidr`. Strings are parsed first; anything that does not parse, or an
 * IPv4 address against an IPv6 network (or the reverse), is not inside.
 *
 * @example inCidr('10.1.2.3', '10.0.0.0/8') // true
 */
export function inCidr(ip: ParsedIp | string, cidr: Cidr | string): boolean {
  const address = typeof ip === 'string' ? parseIp(ip) : ip
  const network = typeof cidr === 'string' ? parseCidr(cidr) : cidr
  return address !== undefined && network !== undefined && inNetwork(address, network)
}

/** `inCidr` for a parsed address and network (what the HTTP layer holds). */
export function inNetwork(address: ParsedIp, network: Cidr): boolean {
  return (
    address.version === network.version &&
    mask(address.bytes, network.prefix).every((byte, i) => byte === network.bytes[i])
  )
}

// Called where a key is about to be hashed (or cached): an issue list per call costs nothing there.
/**
 * The `[IPv4, IPv6]` prefixes of `options` at `path` (`options`: the root), problems into `issues`;
 * `names`: the only names allowed (a tier's), else other names are left alone (`subnetKey(ip,
 * identity)` takes the identity options as they are).
 */
function prefixes(issues: Issues, path: string, options: unknown, names?: string): [number, number] {
  const at = (name: string) => (path === 'options' ? name : `${path}.${name}`)
  const given: SubnetOptions = issues.object(path, options, names) ? options : {}
  return [
    issues.integer(at('ipv4Prefix'), given.ipv4Prefix ?? 32, 0, 32) ?? 32,
    issues.integer(at('ipv6Prefix'), given.ipv6Prefix ?? 64, 0, 128) ?? 64,
  ]
}

/** `ip` parsed, after the checks of `issues` (thrown together); a string that does not parse: undefined. */
function subnetAddress(issues: Issues, ip: unknown): ParsedIp | undefined {
  issues.expect(
    'ip',
    ip,
    typeof ip === 'string' || (ip as Partial<ParsedIp> | null)?.bytes instanceof Uint8Array,
    'ERR_STRING',
    'an address (a string or a ParsedIp)',
  )
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  return typeof ip === 'string' ? parseIp(ip) : (ip as ParsedIp)
}

/**
 * The canonical text of the subnet that identifies a client: the address itself at full length
 * (`203.0.113.5`, `2001:db8::1`), otherwise `network/prefix` (`203.0.113.0/24`,
 * `2001:db8:1:2::/64`). Every address a host rotates through inside its /64 gives the same text.
 * A string that does not parse gives `undefined`.
 *
 * @throws {ConfigError} when a prefix is not an integer in range (0–128 for IPv6, 0–32 for IPv4),
 * `options` not an object, `ip` not a string or a `ParsedIp`. Other names in `options` are left
 * alone: a client's identity options can be passed as they are (`subnetKey(ip, identity)`).
 * @example subnetKey('2001:db8:1:2:aaaa::7') // '2001:db8:1:2::/64'
 */
export function subnetKey(ip: ParsedIp, options?: SubnetOptions): string
export function subnetKey(ip: ParsedIp | string, options?: SubnetOptions): string | undefined
export function subnetKey(ip: ParsedIp | string, options: SubnetOptions = {}): string | undefined {
  const issues = createIssues()
  const [ipv4Prefix, ipv6Prefix] = prefixes(issues, 'options', options)
  const address = subnetAddress(issues, ip)
  return address && subnetText(address, address.version === 4 ? ipv4Prefix : ipv6Prefix)
}

/** `subnetKey` for a parsed address and a prefix already checked (0 to its length in bits). */
export function subnetText(address: ParsedIp, prefix: number): string {
  const text = formatIp({ version: address.version, bytes: mask(address.bytes, prefix) })
  return prefix === address.bytes.length * 8 ? text : `${text}/${prefix}`
}

/**
 * One subnet key per tier, for tiered rules (say 100/min per /64 and 1000/min per /48). A number
 * is an IPv6 prefix, with IPv4 kept whole; an object sets both prefixes.
 *
 * @throws {ConfigError} listing every tier that is not a prefix in range or `SubnetOptions` (as
 * `subnetKey` takes them; `'48'` is no prefix), at `tiers[i]`; `tiers` not an array.
 * @example subnetKeys('2001:db8:1:2::9', [64, 48]) // ['2001:db8:1:2::/64', '2001:db8:1::/48']
 */
export function subnetKeys(ip: ParsedIp, tiers: readonly (number | SubnetOptions)[]): string[]
export function subnetKeys(
  ip: ParsedIp | string,
  tiers: readonly (number | SubnetOptions)[],
): string[] | undefined
export function subnetKeys(
  ip: ParsedIp | string,
  tiers: readonly (number | SubnetOptions)[],
): string[] | undefined {
  const issues = createIssues()
  const list = issues.expect(
    'tiers',
    tiers,
    Array.isArray(tiers),
    'ERR_ARRAY',
    'an array of prefixes or SubnetOptions',
  )
    ? tiers.map((tier, i): [number, number] =>
        typeof tier === 'object'
          ? prefixes(issues, `tiers[${i}]`, tier, 'ipv6Prefix ipv4Prefix')
          : [32, issues.integer(`tiers[${i}]`, tier, 0, 128) ?? 64],
      )
    : []
  const address = subnetAddress(issues, ip)
  return address && list.map(([v4, v6]) => subnetText(address, address.version === 4 ? v4 : v6))
}
