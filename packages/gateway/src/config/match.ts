import { describe } from '../library.js'
import type { Checker } from './checker.js'
import { TOKEN, unseenHeader } from './header-name.js'
import type { Path } from './issues.js'
import type { MatchConfig } from './types.js'

const HOST = /^[A-Za-z0-9*]([A-Za-z0-9*.-]*[A-Za-z0-9*])?(:\d{1,5})?$/
// Visible ASCII, and any character beyond Latin-1's controls (`/café/**`): a glob is matched in
// route form, decoded (`/caf%C3%A9/x` is `/café/x`), so `é` and `%C3%A9` are one rule.
const PATH = /^\/[\x21-\x7e\u00a0-\uffff]*$/

/** The match of a rule without one: no condition, every request. */
export const NO_MATCH: MatchConfig = { hosts: [], paths: [], methods: [], headers: [] }

/** Validates a rule's `match` (host, path, methods, headers). */
export function readMatch(c: Checker, path: Path, value: unknown): MatchConfig | undefined {
  if (!c.object(path, value)) return undefined
  const before = c.issues.length
  c.fields(path, value, ['host', 'path', 'methods', 'headers'])
  const strings = (field: string, pattern: RegExp, code: string, expected: string): string[] => {
    if (value[field] === undefined) return []
    const list = c.list([...path, field], value[field]) ?? []
    // An empty list would be no condition at all: the rule would match every request.
    if (list.length === 0)
      c.add([...path, field], code, `expected at least one ${expected.replace(/^an? /, '')}, got []`)
    return list.flatMap((item, i) => {
      const at = Array.isArray(value[field]) ? [...path, field, i] : [...path, field]
      if (typeof item === 'string' && pattern.test(item)) return [item]
      c.add(at, code, `expected ${expected}, got ${describe(item)}`)
      return []
    })
  }
  const hosts = strings(
    'host',
    HOST,
    'ERR_HOST',
    'a host name or glob like "api.example.com" or "*.example.com"',
  )
  const paths = strings('path', PATH, 'ERR_PATH', 'a path or glob starting with "/", like "/api/**"')
  const methods = strings('methods', TOKEN, 'ERR_METHOD', 'an HTTP method like "GET"').map((m) =>
    m.toUpperCase(),
  )
  const headers: [string, string | boolean][] = []
  if (value.headers !== undefined && c.object([...path, 'headers'], value.headers)) {
    for (const [name, expected] of Object.entries(value.headers)) {
      const at = [...path, 'headers', name]
      if (!TOKEN.test(name))
        c.add(at, 'ERR_HEADER', `expected a header name like "x-api-key", got ${describe(name)}`, 'key')
      else if (unseenHeader(name) !== undefined) c.add(at, 'ERR_HEADER', unseenHeader(name) as string, 'key')
      else if (typeof expected === 'string' || typeof expected === 'boolean')
        headers.push([name.toLowerCase(), expected])
      else
        c.add(
          at,
          'ERR_STRING',
          `expected a value glob (string), true (present) or false (absent), got ${describe(expected)}`,
        )
    }
  }
  if (c.issues.length > before) return undefined
  return { hosts: hosts.map((h) => h.toLowerCase()), paths, methods, headers }
}
