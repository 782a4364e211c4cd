import { parseDuration } from './duration.js'
import { type ConfigIssue, describe } from './errors.js'

/** Collects problems while validating options, so that all of them are reported at once. */
export interface Issues {
  readonly list: ConfigIssue[]
  add(path: string, code: string, message: string): void
  integer(path: string, value: unknown, min: 0 | 1, max?: number): number | undefined
  duration(path: string, value: unknown): number | undefined
  oneOf<T extends string>(path: string, value: unknown, choices: readonly T[]): T | undefined
  /**
   * Whether `value` is a plain object (`ERR_OBJECT`). With `names` (its option names,
   * space-separated), also reports each other key as `ERR_UNKNOWN_OPTION` at `<path>.<key>`
   * (`<key>` when `path` is `options`, the root), listing the names: options read from JSON or
   * YAML have no type checker to catch a misspelling, and one ignored would leave its default.
   */
  object(path: string, value: unknown, names?: string): value is Record<string, unknown>
  /** Reports `expected <what>, got <value>` under `code` unless `ok`; returns `ok`. */
  expect(path: string, value: unknown, ok: boolean, code: string, what: string): boolean
  /** Unless `undefined`: a non-empty string (`ERR_STRING`). */
  string(path: string, value: unknown): boolean
  /** Unless `undefined`: a boolean (`ERR_BOOLEAN`). */
  boolean(path: string, value: unknown): boolean
  /** Unless `undefined`: a function (`ERR_FUNCTION`). */
  function(path: string, value: unknown): boolean
  /** Absent, or an object with a function named `method` (a clock's `now`, a store's `bind`). */
  having(path: string, value: unknown, method: string, code: string, what: string): boolean
}

/** Creates an empty problem collector. */
export function createIssues(): Issues {
  const list: ConfigIssue[] = []
  const add = (path: string, code: string, message: string) => {
    list.push({ path, code, message })
  }
  const expect = (path: string, value: unknown, ok: boolean, code: string, what: string) => {
    if (!ok) add(path, code, `expected ${what}, got ${describe(value)}`)
    return ok
  }
  return {
    list,
    add,
    expect,
    string: (path, value) =>
      expect(
        path,
        value,
        value === undefined || (typeof value === 'string' && value !== ''),
        'ERR_STRING',
        'a non-empty string',
      ),
    boolean: (path, value) =>
      expect(path, value, value === undefined || typeof value === 'boolean', 'ERR_BOOLEAN', 'a boolean'),
    function: (path, value) =>
      expect(path, value, value === undefined || typeof value === 'function', 'ERR_FUNCTION', 'a function'),
    having: (path, value, method, code, what) =>
      expect(
        path,
        value,
        value === undefined ||
          (typeof value === 'object' && typeof (value as Record<string, unknown>)?.[method] === 'function'),
        code,
        what,
      ),

    /** A whole number in `[min, max]`; reports and returns `undefined` otherwise. */
    integer: (path, value, min, max = 2 ** 31 - 1) =>
      // Number.isInteger is false for anything but a number.
      expect(
        path,
        value,
        Number.isInteger(value) && (value as number) >= min && (value as number) <= max,
        'ERR_INTEGER',
        `${min ? 'a positive' : 'a non-negative'} integer up to ${max}`,
      )
        ? (value as number)
        : undefined,

    /** A positive duration; reports and returns `undefined` otherwise. */
    duration(path, value) {
      const ms = parseDuration(value)
      return expect(
        path,
        value,
        ms !== undefined && ms <= MAX_DURATION_MS,
        'ERR_DURATION',
        `a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to ${MAX_DURATION_MS}`,
      )
        ? ms
        : undefined
    },

    /** One of `choices`; reports and returns `undefined` otherwise. */
    oneOf: <T extends string>(path: string, value: unknown, choices: readonly T[]): T | undefined =>
      expect(
        path,
        value,
        typeof value === 'string' && (choices as readonly string[]).includes(value),
        'ERR_CHOICE',
        `one of ${choices.map((c) => `"${c}"`).join(', ')}`,
      )
        ? (value as T)
        : undefined,

    object(path: string, value: unknown, names?: string): value is Record<string, unknown> {
      const ok = expect(
        path,
        value,
        typeof value === 'object' && value !== null && !Array.isArray(value),
        'ERR_OBJECT',
        'an object',
      )
      const list = names?.split(' ')
      if (ok && list)
        for (const key of Object.keys(value as object))
          expect(
            path === 'options' ? key : `${path}.${key}`,
            key,
            list.includes(key),
            'ERR_UNKNOWN_OPTION',
            `one of ${list.join(', ')}`,
          )
      return ok
    },
  }
}

/** Durations up to one year keep every product of the exact arithmetic below 2^53. */
export const MAX_DURATION_MS = 366 * 86_400_000
