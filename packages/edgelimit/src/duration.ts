/** A duration: whole milliseconds, or a string such as `'500ms'`, `'60s'`, `'1m'`, `'1h'`, `'1d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/

/**
 * Parses a duration into whole milliseconds; `undefined` when it is not a positive whole number
 * of milliseconds.
 *
 * @example parseDuration('1.5s') // 1500
 */
export function parseDuration(value: unknown): number | undefined {
  let ms: number
  if (typeof value === 'number') ms = value
  else if (typeof value === 'string') {
    const m = PATTERN.exec(value.trim())
    if (m === null) return undefined
    ms = Number(m[1]) * (UNITS[m[2] as string] as number)
    // '1.5s' is 1500 ms; '0.5ms' is not a whole millisecond.
    ms = Math.round(ms * 1000) / 1000
  } else return undefined
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined
}
