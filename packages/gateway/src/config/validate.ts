import { isIPv6 } from 'node:net'
import { type ClientKeyOptions, describe, type HeaderStandard, validateClientKeyOptions } from '../library.js'
import { type Checker, createChecker } from './checker.js'
import { readClients } from './clients.js'
import { BUILT_IN_DEFAULTS, DEFAULT_FIELDS, readDefaults } from './defaults.js'
import { unseenHeader } from './header-name.js'
import { type Issue, type Path, PolicyError, parsePath } from './issues.js'
import { readRule } from './rule.js'
import { describeUrl } from './secret.js'
import { type PolicySource, readPolicySource } from './source.js'
import { timerDuration } from './timer.js'
import type { GatewayConfig, RuleConfig, StoreConfig, UpstreamConfig } from './types.js'
import { upstreamUrlProblems } from './upstream-url.js'

/**
 * Every code a policy check can report; each has a fixture in `test/fixtures/bad/`.
 * ERR_FILE, ERR_YAML and ERR_ENV come from reading the file, the rest from its meaning.
 */
export const ISSUE_CODES = [
  'ERR_FILE',
  'ERR_YAML',
  'ERR_ENV',
  'ERR_UNKNOWN_FIELD',
  'ERR_REQUIRED',
  'ERR_OBJECT',
  'ERR_ARRAY',
  'ERR_STRING',
  'ERR_BOOLEAN',
  'ERR_INTEGER',
  'ERR_DURATION',
  'ERR_SIZE',
  'ERR_CHOICE',
  'ERR_PERCENT',
  'ERR_RANGE',
  'ERR_VERSION',
  'ERR_URL',
  'ERR_STORE',
  'ERR_CIDR',
  'ERR_HEADER',
  'ERR_HEADER_STANDARD',
  'ERR_HEADER_CONFLICT',
  'ERR_RULE_NAME',
  'ERR_DUPLICATE_RULE',
  'ERR_UNKNOWN_ALGORITHM',
  'ERR_PARAM',
  'ERR_KEY',
  'ERR_HOST',
  'ERR_PATH',
  'ERR_METHOD',
  'ERR_TIER',
  'ERR_COST_NEVER_ADMITTED',
  'ERR_SYNC_INTERVAL',
] as const

const TOP_FIELDS = [
  'version',
  'upstream',
  'clients',
  'store',
  'identity',
  'headers',
  'defaults',
  'rules',
  'admin',
]
const STANDARDS: readonly HeaderStandard[] = ['draft-10', 'draft-7', 'draft-6', 'legacy']
const IDENTITY_FIELDS = [
  'trustedProxies',
  'header',
  'trustPlatform',
  'ipv6Prefix',
  'ipv4Prefix',
  'secret',
  'fallback',
]

/** A policy as loaded from a file: what it means, and where it came from. */
export interface LoadedPolicy {
  readonly config: GatewayConfig
  readonly source: PolicySource
}

/**
 * Reads, substitutes and validates a policy file. Offline: nothing is contacted.
 *
 * @throws {PolicyError} listing every problem with its file, line, column and path.
 * @example const { config } = loadPolicy('examples/edgelimit.yaml')
 */
export function loadPolicy(file: string, env?: Readonly<Record<string, string | undefined>>): LoadedPolicy {
  const source = readPolicySource(file, env)
  const { config, issues } = checkSource(source)
  if (config === undefined) throw new PolicyError(issues)
  return { config, source }
}

/** Validates a parsed source; every issue placed in the file. */
export function checkSource(source: PolicySource): { config?: GatewayConfig; issues: readonly Issue[] } {
  if (
    source.value === undefined ||
    source.issues.some((i) => i.code === 'ERR_YAML' || i.code === 'ERR_FILE')
  ) {
    return { issues: source.issues }
  }
  const { config, issues } = validatePolicy(source.value)
  // A field whose variable is not set holds the text `${NAME}`: its ERR_ENV says all there is.
  const unset = source.issues.filter((i) => i.code === 'ERR_ENV').map((i) => i.path)
  const follows = (issue: Issue) =>
    unset.some(
      (at) => at.length <= issue.path.length && at.every((s, k) => String(s) === String(issue.path[k])),
    )
  const all = [...source.issues, ...issues.filter((i) => !follows(i)).map(source.place)]
  return all.length === 0 && config !== undefined ? { config, issues: [] } : { issues: all }
}

/** What a policy document means: every problem, or the validated configuration. */
export function validatePolicy(value: unknown): { config?: GatewayConfig; issues: readonly Issue[] } {
  const c = createChecker()
  if (value === null || value === undefined) {
    c.add([], 'ERR_REQUIRED', 'the file is empty; a policy needs at least `rules:`')
    return { issues: c.issues }
  }
  if (!c.object([], value)) return { issues: c.issues }
  c.fields([], value, TOP_FIELDS)
  if (value.version !== undefined && value.version !== 1) {
    c.add(['version'], 'ERR_VERSION', `this edgelimit reads policy version 1, got ${describe(value.version)}`)
  }
  const upstream = value.upstream === undefined ? undefined : readUpstream(c, value.upstream)
  const clients = readClients(c, value.clients)
  const store = readStore(c, value.store ?? 'memory')
  const identity = value.identity === undefined ? {} : readIdentity(c, value.identity)
  const headers = readHeaders(c, value.headers)
  let defaults = BUILT_IN_DEFAULTS
  let defaultCostAt: Path | undefined
  if (value.defaults !== undefined && c.object(['defaults'], value.defaults)) {
    c.fields(['defaults'], value.defaults, DEFAULT_FIELDS)
    defaults = readDefaults(c, ['defaults'], value.defaults, BUILT_IN_DEFAULTS)
    if (value.defaults.cost !== undefined) defaultCostAt = ['defaults', 'cost']
  }
  const rules: RuleConfig[] = []
  if (value.rules === undefined)
    c.add(['rules'], 'ERR_REQUIRED', 'the field "rules" is required (a list; it may be empty)')
  else if (!Array.isArray(value.rules))
    c.add(['rules'], 'ERR_ARRAY', `expected a list of rules, got ${describe(value.rules)}`)
  else {
    const names = new Set<string>()
    value.rules.forEach((rule, i) => {
      const read = readRule(c, i, rule, defaults, names, defaultCostAt)
      if (read !== undefined) rules.push(read)
    })
  }
  let token: string | undefined
  if (value.admin !== undefined && c.object(['admin'], value.admin)) {
    c.fields(['admin'], value.admin, ['token'])
    if (value.admin.token !== undefined) token = c.secret(['admin', 'token'], value.admin.token)
  }
  if (c.issues.length > 0 || clients === undefined || store === undefined || identity === undefined)
    return { issues: c.issues }
  return {
    config: { version: 1, upstream, clients, store, identity, headers, rules, admin: { token } },
    issues: [],
  }
}

function readUpstream(c: Checker, value: unknown): UpstreamConfig | undefined {
  // `upstream: http://…` is short for `upstream: { url: http://… }`.
  const short = typeof value === 'string'
  const o = short ? { url: value } : value
  if (!c.object(['upstream'], o)) return undefined
  c.fields(['upstream'], o, [
    'url',
    'timeout',
    'connectTimeout',
    'bodyTimeout',
    'connections',
    'preserveHost',
  ])
  let url: string | undefined
  if (o.url === undefined) c.add(['upstream', 'url'], 'ERR_REQUIRED', 'the field "url" is required')
  else {
    const at: Path = short ? ['upstream'] : ['upstream', 'url']
    url = c.url(at, o.url, ['http:', 'https:'])
    const problems = url === undefined ? [] : upstreamUrlProblems(url)
    for (const problem of problems) c.add(at, 'ERR_URL', problem)
    if (problems.length > 0) url = undefined
  }
  // Each arms a timer (a request waiting for a free connection, a WebSocket handshake, a client
  // that reads nothing): beyond Node's timer limit it would fire at once.
  const timeoutMs = o.timeout === undefined ? 30_000 : timerDuration(c, ['upstream', 'timeout'], o.timeout)
  const connectTimeoutMs =
    o.connectTimeout === undefined
      ? 5_000
      : timerDuration(c, ['upstream', 'connectTimeout'], o.connectTimeout)
  const bodyTimeoutMs =
    o.bodyTimeout === undefined ? 300_000 : timerDuration(c, ['upstream', 'bodyTimeout'], o.bodyTimeout)
  const connections =
    o.connections === undefined ? 128 : c.integer(['upstream', 'connections'], o.connections, 1, 65_536)
  const preserveHost =
    o.preserveHost === undefined ? false : c.boolean(['upstream', 'preserveHost'], o.preserveHost)
  if (
    url === undefined ||
    timeoutMs === undefined ||
    connectTimeoutMs === undefined ||
    bodyTimeoutMs === undefined ||
    connections === undefined ||
    preserveHost === undefined
  ) {
    return undefined
  }
  return { url, timeoutMs, connectTimeoutMs, bodyTimeoutMs, connections, preserveHost }
}

function readStore(c: Checker, value: unknown): StoreConfig | undefined {
  if (value === 'memory') return { type: 'memory', maxKeys: 100_000 }
  if (typeof value === 'string') {
    if (/^rediss?:\/\//.test(value)) {
      const url = redisUrl(c, ['store'], value, true)
      return url === undefined ? undefined : { type: 'redis', url, prefix: 'edgelimit' }
    }
    c.add(
      ['store'],
      'ERR_STORE',
      `expected memory, a redis:// URL, or a mapping with a type, got ${describeUrl(value)}`,
    )
    return undefined
  }
  if (!c.object(['store'], value)) return undefined
  const type = value.type
  const prefix = (): string | undefined => {
    if (value.prefix === undefined) return 'edgelimit'
    const p = c.string(['store', 'prefix'], value.prefix)
    if (p !== undefined && /[{}]/.test(p)) {
      c.add(
        ['store', 'prefix'],
        'ERR_STRING',
        'expected a prefix without braces (they would move the Cluster hash tag)',
      )
      return undefined
    }
    return p
  }
  const required = (field: string): boolean => {
    if (value[field] !== undefined) return true
    c.add(['store', field], 'ERR_REQUIRED', `the field "${field}" is required for a ${String(type)} store`)
    return false
  }
  switch (type) {
    case 'memory': {
      c.fields(['store'], value, ['type', 'maxKeys'])
      const maxKeys =
        value.maxKeys === undefined ? 100_000 : c.integer(['store', 'maxKeys'], value.maxKeys, 1, 100_000_000)
      return maxKeys === undefined ? undefined : { type, maxKeys }
    }
    case 'redis': {
      c.fields(['store'], value, ['type', 'url', 'prefix'])
      const url = required('url') ? redisUrl(c, ['store', 'url'], value.url, true) : undefined
      const p = prefix()
      return url === undefined || p === undefined ? undefined : { type, url, prefix: p }
    }
    case 'redis-cluster': {
      c.fields(['store'], value, ['type', 'nodes', 'prefix'])
      const list = required('nodes') ? c.list(['store', 'nodes'], value.nodes) : undefined
      const nodes = (list ?? []).map((n, i) => {
        const at: Path = Array.isArray(value.nodes) ? ['store', 'nodes', i] : ['store', 'nodes']
        return clusterNode(c, at, n)
      })
      if (list !== undefined && list.length === 0)
        c.add(['store', 'nodes'], 'ERR_REQUIRED', 'expected at least one node')
      const p = prefix()
      if (list === undefined || list.length === 0 || nodes.includes(undefined) || p === undefined)
        return undefined
      return { type, nodes: nodes as string[], prefix: p }
    }
    case 'upstash': {
      c.fields(['store'], value, ['type', 'url', 'token', 'prefix', 'timeout'])
      const url = required('url') ? upstashUrl(c, value.url) : undefined
      const token = required('token') ? c.secret(['store', 'token'], value.token) : undefined
      const p = prefix()
      const timeoutMs =
        value.timeout === undefined ? 5_000 : timerDuration(c, ['store', 'timeout'], value.timeout)
      return url === undefined || token === undefined || p === undefined || timeoutMs === undefined
        ? undefined
        : { type, url, token, prefix: p, timeoutMs }
    }
    default:
      c.add(
        ['store', 'type'],
        'ERR_STORE',
        `expected a store type of memory, redis, redis-cluster or upstash, got ${describe(type)}`,
      )
      return undefined
  }
}

// What the Upstash client accepts (@upstash/redis HttpClient, after it drops one trailing "/"):
// a lower-case scheme, and no white space anywhere. It throws on anything else.
const UPSTASH_URL = /^https?:\/\/[^\s#$./?].\S*$/
// What it accepts but fails on every request: it appends "/pipeline" (or "/") to the text, so a
// query or fragment swallows the path, and an empty path segment is a path the endpoint lacks.
const UPSTASH_BROKEN = /[?#]|\/\/|\/$/

/** `host:port`, an IPv6 host in brackets (`[::1]:7000`), or a redis:// URL without a path. */
function clusterNode(c: Checker, at: Path, node: unknown): string | undefined {
  if (typeof node === 'string' && /^rediss?:\/\//.test(node)) return redisUrl(c, at, node, false)
  const m = typeof node === 'string' ? /^(?:\[([^\]]*)\]|([\w.-]+)):(\d+)$/.exec(node) : null
  if (m === null) {
    c.add(
      at,
      'ERR_URL',
      `expected host:port (like "10.0.0.1:7000", or "[::1]:7000" for IPv6) or a redis:// URL, got ${describeUrl(node)}`,
    )
    return undefined
  }
  if (m[1] !== undefined && !isIPv6(m[1])) {
    c.add(at, 'ERR_URL', `expected an IPv6 address in the brackets, got ${describeUrl(node)}`)
    return undefined
  }
  return portIn(c, at, m[3] as string, node as string) ? (node as string) : undefined
}

/** A TCP port as written: 1 to 65535, digits without a leading zero. */
function portIn(c: Checker, at: Path, port: string, value: string): boolean {
  if (/^[1-9]\d{0,4}$/.test(port) && Number(port) <= 65_535) return true
  c.add(at, 'ERR_URL', `expected a port from 1 to 65535, got ${describeUrl(value)}`)
  return false
}

// The port of a redis:// URL as written: the URL parser refuses one above 65535 with no reason.
// The user and password end at the last `@` before the path; the port, if any, runs to the path
// (`redis://:pw@host` has none: `pw` is not a port).
const URL_PORT = /^rediss?:\/\/(?:[^/?#]*@)?(?:\[[^\]]*\]|[^:/?#[\]@]*):([^/?#@]*)(?:[/?#]|$)/s

/**
 * A redis:// URL as the client reads it: the user and password percent-decode (the client decodes
 * them and throws on a stray `%`), and the path, if any, is a database number (ioredis sends
 * `SELECT NaN` for `/abc`, and its failed reply crashed the process). A Cluster has database 0
 * only: a node's path is refused.
 */
function redisUrl(c: Checker, path: Path, value: unknown, database: boolean): string | undefined {
  const port = typeof value === 'string' ? URL_PORT.exec(value)?.[1] : undefined
  if (port !== undefined && port !== '' && !portIn(c, path, port, value as string)) return undefined
  const url = c.url(path, value, ['redis:', 'rediss:'])
  if (url === undefined) return undefined
  const parsed = new URL(url)
  try {
    decodeURIComponent(parsed.username)
    decodeURIComponent(parsed.password)
  } catch {
    c.add(path, 'ERR_URL', 'the user or password in the URL is not valid percent-encoding (write % as %25)')
    return undefined
  }
  if (parsed.pathname === '' || parsed.pathname === '/' || (database && /^\/\d{1,9}$/.test(parsed.pathname)))
    return url
  c.add(
    path,
    'ERR_URL',
    database
      ? `expected a database number after the address (redis://host:6379/0), got "${parsed.pathname.slice(1)}"`
      : `a Cluster node is an address only (a Cluster has database 0 only), got the path "${parsed.pathname}"`,
  )
  return undefined
}

function upstashUrl(c: Checker, value: unknown): string | undefined {
  const url = c.url(['store', 'url'], value, ['https:', 'http:'])
  if (url === undefined) return undefined
  const base = url.replace(/\/$/, '')
  if (UPSTASH_URL.test(base) && !UPSTASH_BROKEN.test(base.slice(base.indexOf('//') + 2))) return url
  c.add(
    ['store', 'url'],
    'ERR_URL',
    `expected a URL as the Upstash client takes it (https:// or http://, in lower case, no white space, no query, fragment or empty path segment), got ${describeUrl(value)}`,
  )
  return undefined
}

function readIdentity(c: Checker, value: unknown): ClientKeyOptions | undefined {
  if (!c.object(['identity'], value)) return undefined
  c.fields(['identity'], value, IDENTITY_FIELDS)
  const before = c.issues.length
  // The secret is checked here, where its value is never printed; the library checks the rest.
  const secret = value.secret === undefined ? undefined : c.secret(['identity', 'secret'], value.secret)
  const known = Object.fromEntries(
    Object.entries(value).filter(([k]) => k !== 'secret' && IDENTITY_FIELDS.includes(k)),
  )
  for (const issue of validateClientKeyOptions(known, 'identity'))
    c.add(parsePath(issue.path), issue.code, issue.message)
  // The library takes any token; the gateway reads Node's headers, which never have this one.
  const unseen = typeof value.header === 'string' ? unseenHeader(value.header) : undefined
  if (unseen !== undefined) c.add(['identity', 'header'], 'ERR_HEADER', unseen)
  if (c.issues.length > before) return undefined
  return (secret === undefined ? known : { ...known, secret }) as ClientKeyOptions
}

function readHeaders(c: Checker, value: unknown): HeaderStandard[] {
  if (value === undefined) return ['draft-10']
  if (value === false) return []
  const list = c.list(['headers'], value) ?? []
  const standards = list.filter((s, i): s is HeaderStandard => {
    if (STANDARDS.includes(s as HeaderStandard)) return true
    c.add(
      Array.isArray(value) ? ['headers', i] : ['headers'],
      'ERR_HEADER_STANDARD',
      `expected one of ${STANDARDS.join(', ')} (or false for none), got ${describe(s)}`,
    )
    return false
  })
  const drafts = new Set(standards.filter((s) => s !== 'legacy'))
  if (drafts.size > 1) {
    c.add(
      ['headers'],
      'ERR_HEADER_CONFLICT',
      `${[...drafts].join(', ')} emit clashing RateLimit fields; choose one (legacy may be added)`,
    )
  }
  return standards
}
