import { parseDuration } from './duration.js'
import { type ConfigIssue, describe } from './errors.js'

/** Collects problems while validating options, so that all of them are reported at once. */
export interface Issues {
  readonly list: ConfigIssue[]
  add(path: string, code: string, message: string): void
  integer(path: string, value: unknown, min: 0 | 1, max?: number): number | undefined
  duration(path: string, value: unknown): number | undefined
  oneOf<T extends string>(path: string, value: unknown, choices: readonly T[]): T | undefined
  object(path: string, value: unknown): value is Record<string, unknown>
  /** Reports `expected <what>, got <value>` under `code` unless `ok`; returns `ok`. */
  expect(path: string, value: unknown, ok: boolean, code: string, what: string): boolean
  /** Unless `undefined`: a non-empty string (`ERR_STRING`). */
  string(path: string, value: unknown): boolean
  /** Unless `undefined`: a boolean (`ERR_BOOLEAN`). */
  boolean(path: string, value: unknown): boolean
  /** Unless `undefined`: a function (`ERR_FUNCTION`). */
  function(path: string, value: unknown): boolean
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

    /** A whole number in `[min, max]`; reports and returns `undefined` otherwise. */
    integer(path: string, value: unknown, min: 0 | 1, max = 2 ** 31 - 1): number | undefined {
      // Number.isInteger is false for anything but a number.
      if (Number.isInteger(value) && (value as number) >= min && (value as number) <= max) {
        return value as number
      }
      expect(
        path,
        value,
        false,
        'ERR_INTEGER',
        `${min ? 'a positive' : 'a non-negative'} integer up to ${max}`,
      )
      return undefined
    },

    /** A positive duration; reports and returns `undefined` otherwise. */
    duration(path: string, value: unknown): number | undefined {
      const ms = parseDuration(value)
      if (ms !== undefined && ms <= MAX_DURATION_MS) return ms
      expect(
        path,
        value,
        false,
        'ERR_DURATION',
        `a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to ${MAX_DURATION_MS}`,
      )
      return undefined
    },

    /** One of `choices`; reports and returns `undefined` otherwise. */
    oneOf<T extends string>(path: string, value: unknown, choices: readonly T[]): T | undefined {
      if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as T
      expect(path, value, false, 'ERR_CHOICE', `one of ${choices.map((c) => `"${c}"`).join(', ')}`)
      return undefined
    },

    /** Whether `value` is a plain object; reports otherwise. */
    object(path: string, value: unknown): value is Record<string, unknown> {
      return expect(
        path,
        value,
        typeof value === 'object' && value !== null && !Array.isArray(value),
        'ERR_OBJECT',
        'an object',
      )
    },
  }
}

/** Durations up to one year keep every product of the exact arithmetic below 2^53. */
export const MAX_DURATION_MS = 366 * 86_400_000
