import { parse } from 'yaml'
import type { Issue, Path } from './issues.js'

// `${NAME}`, `${NAME:-default}` (default when unset or empty), and `$${` for a literal `${`.
const PLACEHOLDER = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g
const WHOLE = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/

/**
 * Replaces `${NAME}` in every string value (never in keys) with the environment's value. A value
 * that is exactly one placeholder where `typed(path)` holds (a field that takes a number or
 * true/false, quoted or not; or a plain, unquoted scalar of a field that is not always text) is
 * read again as YAML, so `limit: ${LOGIN_LIMIT}` and `limit: "${LOGIN_LIMIT}"` are numbers. A
 * field whose whole value expands to an empty string is absent (`token: ${ADMIN_TOKEN:-}`). An
 * unset variable without a default is an issue (`ERR_ENV`).
 *
 * @example substituteEnv({ secret: '${KEY_SECRET}' }, { KEY_SECRET: 's3cret' }, () => true)
 */
export function substituteEnv(
  value: unknown,
  env: Readonly<Record<string, string | undefined>>,
  typed: (path: Path) => boolean,
): { value: unknown; issues: Issue[] } {
  const issues: Issue[] = []

  function text(s: string, path: Path): unknown {
    if (!s.includes('${')) return s
    const out = s.replace(PLACEHOLDER, (match, name: string | undefined, fallback: string | undefined) => {
      if (name === undefined) return '${'
      // A default ends at the first `}`: `${A:-${B}}` would be `${B` and a stray `}`, the token
      // "abc}" when A is set. Nesting is not supported, so it is refused rather than misread.
      if (fallback?.includes('${')) {
        issues.push({
          path,
          code: 'ERR_ENV',
          message: `the default of \${${name}:-…} holds another placeholder; a default is plain text (nested placeholders are not supported)`,
        })
        return match
      }
      const set = env[name]
      if (fallback !== undefined) return set === undefined || set === '' ? fallback : set
      if (set !== undefined) return set
      issues.push({
        path,
        code: 'ERR_ENV',
        message: `environment variable ${name} is not set (write \${${name}:-default} for a default)`,
      })
      return match
    })
    if (WHOLE.test(s) && typed(path)) {
      try {
        const typed: unknown = parse(out)
        if (typeof typed === 'number' || typeof typed === 'boolean') return typed
      } catch {}
    }
    return out
  }

  function walk(v: unknown, path: Path): unknown {
    if (typeof v === 'string') return text(v, path)
    if (Array.isArray(v)) return v.map((item, i) => walk(item, [...path, i]))
    if (typeof v === 'object' && v !== null) {
      const fields: [string, unknown][] = []
      for (const [k, item] of Object.entries(v)) {
        const value = walk(item, [...path, k])
        // `token: ${ADMIN_TOKEN:-}` with the variable unset: the field is absent.
        if (value === '' && typeof item === 'string' && WHOLE.test(item)) continue
        fields.push([k, value])
      }
      // Own data properties: `out[k] = value` would make a `__proto__:` key the prototype, its
      // fields read but never checked; as an own field it is refused like any unknown one.
      return Object.fromEntries(fields)
    }
    return v
  }

  return { value: walk(value, []), issues }
}
