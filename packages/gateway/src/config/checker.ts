import { parseDuration } from 'edgelimit'
import { describe } from '../library.js'
import type { Issue, Path } from './issues.js'
import { describeUrl, hidden } from './secret.js'

/** Durations up to one year (the library's bound, 366 days: its longest window too). */
export const MAX_DURATION_MS = 366 * 86_400_000

/** Collects every problem while validating, each with its path; helpers report and return `undefined`. */
export interface Checker {
  readonly issues: Issue[]
  /** Whether a problem is reported at exactly `path` (of `code`, or of any code but `except`). */
  has(path: Path, code: { readonly is: string } | { readonly except: string }): boolean
  add(path: Path, code: string, message: string, at?: Issue['at']): void
  object(path: Path, value: unknown): value is Record<string, unknown>
  /** Reports fields not in `allowed` (with a suggestion when one is close). */
  fields(path: Path, value: Record<string, unknown>, allowed: readonly string[]): void
  string(path: Path, value: unknown): string | undefined
  /** A non-empty string whose value no message shows (a secret, a token). */
  secret(path: Path, value: unknown): string | undefined
  boolean(path: Path, value: unknown): boolean | undefined
  /** A list, or a single item taken as a list of one. */
  list(path: Path, value: unknown): unknown[] | undefined
  integer(path: Path, value: unknown, min: number, max?: number): number | undefined
  duration(path: Path, value: unknown): number | undefined
  choice<T extends string>(path: Path, value: unknown, choices: readonly T[]): T | undefined
  url(path: Path, value: unknown, protocols: readonly string[]): string | undefined
}

/** Creates an empty checker. */
export function createChecker(): Checker {
  const issues: Issue[] = []
  // The codes reported at each path: a look-up, not a scan of every issue (a file can hold 100,000s).
  const codesAt = new Map<string, string[]>()
  const add = (path: Path, code: string, message: string, at?: Issue['at']) => {
    issues.push(at === undefined ? { path, code, message } : { path, code, message, at })
    const key = JSON.stringify(path)
    const codes = codesAt.get(key)
    if (codes === undefined) codesAt.set(key, [code])
    else codes.push(code)
  }
  return {
    issues,
    has(path, code) {
      const codes = codesAt.get(JSON.stringify(path)) ?? []
      return 'is' in code ? codes.includes(code.is) : codes.some((c) => c !== code.except)
    },
    add,
    object(path, value): value is Record<string, unknown> {
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return true
      add(path, 'ERR_OBJECT', `expected a mapping (key: value lines), got ${describe(value)}`)
      return false
    },
    fields(path, value, allowed) {
      for (const name of Object.keys(value)) {
        if (allowed.includes(name)) continue
        const close = allowed.find((a) => distance(a, name) <= Math.max(1, Math.floor(a.length / 4)))
        add(
          [...path, name],
          'ERR_UNKNOWN_FIELD',
          `unknown field "${name}"${close === undefined ? '' : ` (did you mean "${close}"?)`}; expected one of ${allowed.join(', ')}`,
          'key',
        )
      }
    },
    string(path, value) {
      if (typeof value === 'string' && value !== '') return value
      add(path, 'ERR_STRING', `expected a non-empty string, got ${describe(value)}`)
      return undefined
    },
    secret(path, value) {
      if (typeof value === 'string' && value !== '') return value
      add(path, 'ERR_STRING', `expected a non-empty string, got ${hidden(value)}`)
      return undefined
    },
    boolean(path, value) {
      if (typeof value === 'boolean') return value
      add(path, 'ERR_BOOLEAN', `expected true or false, got ${describe(value)}`)
      return undefined
    },
    list(path, value) {
      if (Array.isArray(value)) return value
      if (typeof value === 'string' || typeof value === 'number') return [value]
      add(path, 'ERR_ARRAY', `expected a list (or a single value), got ${describe(value)}`)
      return undefined
    },
    integer(path, value, min, max = 2 ** 31 - 1) {
      if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return value
      const what =
        min === 0 ? 'a non-negative integer' : min === 1 ? 'a positive integer' : `an integer ≥ ${min}`
      add(path, 'ERR_INTEGER', `expected ${what} up to ${max}, got ${describe(value)}`)
      return undefined
    },
    duration(path, value) {
      const ms = parseDuration(value)
      if (ms !== undefined && ms <= MAX_DURATION_MS) return ms
      add(
        path,
        'ERR_DURATION',
        `expected a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to ${MAX_DURATION_MS}, got ${describe(value)}`,
      )
      return undefined
    },
    choice(path, value, choices) {
      if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as never
      add(
        path,
        'ERR_CHOICE',
        `expected one of ${choices.map((c) => `"${c}"`).join(', ')}, got ${describe(value)}`,
      )
      return undefined
    },
    url(path, value, protocols) {
      let parsed: URL | undefined
      try {
        parsed = typeof value === 'string' ? new URL(value) : undefined
      } catch {}
      if (parsed !== undefined && protocols.includes(parsed.protocol) && parsed.hostname !== '')
        return value as string
      add(
        path,
        'ERR_URL',
        `expected a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}, got ${describeUrl(value)}`,
      )
      return undefined
    },
  }
}

/** Reports the required `field` missing from the object at `path`. */
export function missing(c: Checker, path: Path, field: string): undefined {
  c.add([...path, field], 'ERR_REQUIRED', `the field "${field}" is required`)
  return undefined
}

/** Levenshtein distance, for "did you mean". */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0] as number
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const up = row[j] as number
      row[j] = Math.min(up + 1, (row[j - 1] as number) + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1))
      diagonal = up
    }
  }
  return row[b.length] as number
}
