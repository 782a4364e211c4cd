import { ALL_PARAMS } from './algorithm.js'
import type { Path } from './issues.js'

const SETTINGS = ['cost', 'timeout', 'enforce', 'syncInterval']

/**
 * Fields that take a number or true/false (a count, a duration or size in whole units, a switch),
 * `#` being any list index and `*` any plan name. `#` and `*` are never field names.
 */
const TYPED_FIELDS = new Set([
  'version',
  'upstream.timeout',
  'upstream.connectTimeout',
  'upstream.bodyTimeout',
  'upstream.connections',
  'upstream.preserveHost',
  'clients.headersTimeout',
  'clients.requestTimeout',
  'clients.keepAliveTimeout',
  'clients.maxBodySize',
  'clients.websocketIdleTimeout',
  'store.maxKeys',
  'store.timeout',
  'identity.trustedProxies',
  'identity.trustPlatform',
  'identity.ipv6Prefix',
  'identity.ipv4Prefix',
  'headers',
  ...SETTINGS.map((s) => `defaults.${s}`),
  ...[...SETTINGS, ...ALL_PARAMS].map((s) => `rules.#.${s}`),
  ...ALL_PARAMS.map((p) => `rules.#.tiers.plans.*.${p}`),
])

/**
 * Whether the field at `path` takes a number or true/false, so that a `${VAR}` placeholder there
 * is read as one even when quoted: inside a `{ … }` flow mapping it must be, and the JSON Schema,
 * which sees no quotes, accepts it.
 *
 * @example isTypedField(['rules', 0, 'tiers', 'plans', 'pro', 'limit']) // true
 */
export function isTypedField(path: Path): boolean {
  const segments = path.map((s) => (typeof s === 'number' ? '#' : s))
  if (segments.length === 6 && segments[2] === 'tiers' && segments[3] === 'plans') segments[4] = '*'
  return TYPED_FIELDS.has(segments.join('.'))
}
