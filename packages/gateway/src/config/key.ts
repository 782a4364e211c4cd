import { describe } from '../library.js'
import type { Checker } from './checker.js'
import { TOKEN, unseenHeader } from './header-name.js'
import type { Path } from './issues.js'
import type { KeyPart } from './types.js'

const SIMPLE_KEYS = ['ip', 'route', 'path', 'method', 'host', 'global'] as const

/** `ip`, `header:<name>`, `query:<name>`, `route`, `path`, `method`, `host`, `global`, or a list of them. */
export function readKey(c: Checker, path: Path, value: unknown): KeyPart[] | undefined {
  const list = c.list(path, value)
  if (list === undefined) return undefined
  if (list.length === 0) {
    c.add(path, 'ERR_KEY', 'expected at least one key part, like ip or header:x-api-key')
    return undefined
  }
  const parts: KeyPart[] = []
  let ok = true
  list.forEach((item, i) => {
    const at = Array.isArray(value) ? [...path, i] : path
    const text = typeof item === 'string' ? item.trim() : ''
    const m = /^(header|query):(.+)$/.exec(text)
    const unseen = m?.[1] === 'header' ? unseenHeader(m[2] as string) : undefined
    if ((SIMPLE_KEYS as readonly string[]).includes(text))
      parts.push({ kind: text as (typeof SIMPLE_KEYS)[number] })
    else if (unseen !== undefined) {
      ok = false
      c.add(at, 'ERR_KEY', `${unseen}, and the key would always fall back to the address`)
    } else if (m?.[1] === 'header' && TOKEN.test(m[2] as string))
      parts.push({ kind: 'header', name: (m[2] as string).toLowerCase() })
    else if (m?.[1] === 'query') parts.push({ kind: 'query', name: m[2] as string })
    else {
      ok = false
      c.add(
        at,
        'ERR_KEY',
        `expected ${SIMPLE_KEYS.join(', ')}, header:<name> or query:<name>, got ${describe(item)}`,
      )
    }
  })
  return ok ? parts : undefined
}
