import { describe } from '../library.js'
import type { Path } from './issues.js'

/**
 * Fields that are always text, where `${VAR}` is never read again as YAML: a secret such as
 * `20251130` or `0x7f3a9c41` stays what the environment holds. `#` is any list index.
 */
const TEXT_FIELDS = new Set([
  'identity.secret',
  'identity.header',
  'identity.fallback',
  'admin.token',
  'upstream',
  'upstream.url',
  'store',
  'store.url',
  'store.token',
  'store.prefix',
  'store.nodes',
  'store.nodes.#',
])

/** Whether the field at `path` is always a string (see `TEXT_FIELDS`). */
export function isTextField(path: Path): boolean {
  return TEXT_FIELDS.has(path.map((s) => (typeof s === 'number' ? '#' : s)).join('.'))
}

/**
 * A secret's value as an error message may show it: its type only (`a number (value hidden)`),
 * so that check output, `policy rejected` logs and reload answers never carry it.
 *
 * @example hidden(20251130) // 'a number (value hidden)'
 */
export function hidden(value: unknown): string {
  if (value === '' || typeof value === 'object' || value === undefined) return describe(value)
  return `a ${typeof value} (value hidden)`
}

/**
 * A URL as an error message may show it: the user, password, query and fragment (where
 * credentials go) masked, whether or not the text parses.
 *
 * @example describeUrl('redis://:pw@cache:6379/x?password=pw') // '"redis://***@cache:6379/x?***" (string)'
 */
export function describeUrl(value: unknown): string {
  return typeof value === 'string' ? describe(maskUrl(value)) : describe(value)
}

/**
 * A URL's text with the user, password, query and fragment masked, for logs and messages.
 *
 * @example maskUrl('http://u:pw@origin:3000/x?k=1') // 'http://***@origin:3000/x?***'
 */
export function maskUrl(url: string): string {
  // Up to the last `@` after the scheme: a password may hold `/` or `@` unencoded.
  return url.replace(/^([a-z][a-z\d+.-]*:\/*)?.*@/is, '$1***@').replace(/([?#]).*$/s, '$1***')
}
