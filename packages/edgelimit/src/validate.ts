import { parseDuration } from './duration.js'
import { type ConfigIssue, describe } from './errors.js'

/** Collects problems while validating options, so that all of them are reported at once. */
export interface Issues {
  readonly list: ConfigIssue[]
  add(path: string, code: string, message: string): void
  integer(path: string, value: unknown, min: number, max?: number): number | undefined
  duration(path: string, value: unknown): number | undefined
  oneOf<T extends string>(path: string, value: unknown, choices: readonly T[]): T | undefined
  object(path: string, value: unknown): value is Record<string, unknown>
}

/** Creates an empty problem collector. */
export function createIssues(): Issues {
  const list: ConfigIssue[] = []
  const add = (path: string, code: string, message: string) => {
    list.push({ path, code, message })
  }
  return {
    list,
    add,

    /** A whole number in `[min, max]`; reports and returns `undefined` otherwise. */
    integer(path: string, value: unknown, min: number, max = 2 ** 31 - 1): number | undefined {
      if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) {
        return value
      }
      const what =
        min === 0 ? 'a non-negative integer' : min === 1 ? 'a positive integer' : `an integer ≥ ${min}`
      add(path, 'ERR_INTEGER', `expected ${what} up to ${max}, got ${describe(value)}`)
      return undefined
    },

    /** A positive duration; reports and returns `undefined` otherwise. */
    duration(path: string, value: unknown): number | undefined {
      const ms = parseDuration(value)
      if (ms !== undefined && ms <= MAX_DURATION_MS) return ms
      add(
        path,
        'ERR_DURATION',
        `expected a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to ${MAX_DURATION_MS}, got ${describe(value)}`,
      )
      return undefined
    },

    /** One of `choices`; reports and returns `undefined` otherwise. */
    oneOf<T extends string>(path: string, value: unknown, choices: readonly T[]): T | undefined {
      if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as T
      add(
        path,
        'ERR_CHOICE',
        `expected one of ${choices.map((c) => `"${c}"`).join(', ')}, got ${describe(value)}`,
      )
      return undefined
    },

    /** Whether `value` is a plain object; reports otherwise. */
    object(path: string, value: unknown): value is Record<string, unknown> {
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return true
      add(path, 'ERR_OBJECT', `expected an object, got ${describe(value)}`)
      return false
    },
  }
}

/** Durations up to one year keep every product of the exact arithmetic below 2^53. */
export const MAX_DURATION_MS = 366 * 86_400_000
