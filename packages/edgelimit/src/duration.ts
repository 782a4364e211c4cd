/** A duration: whole milliseconds, or a string such as `'500ms'`, `'60s'`, `'1m'`, `'1h'`, `'1d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const PATTERN = /^(\d+)(?:\.(\d+))?(ms|s|m|h|d)$/

/**
 * Parses a duration into whole milliseconds; `undefined` when it is not a positive whole number
 * of milliseconds.
 *
 * @example parseDuration('1.5s') // 1500
 */
export function parseDuration(value: unknown): number | undefined {
  let ms = value
  if (typeof value === 'string') {
    const m = PATTERN.exec(value.trim())
    // Exact: '1.5s' is 15 × 1000 / 10 = 1500 ms. With the numerator a safe integer the quotient
    // is whole only when the value is a whole number of ms ('0.5ms' and '1.0004ms' are not).
    const fraction = m?.[2] ?? ''
    ms = m && Number(m[1] + fraction) * (UNITS[m[3] as string] as number)
    ms = Number.isSafeInteger(ms) ? (ms as number) / 10 ** fraction.length : 0
  }
  return Number.isSafeInteger(ms) && (ms as number) > 0 ? (ms as number) : undefined
}
