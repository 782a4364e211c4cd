// A number as JSON writes it: sign, integer digits, fraction, exponent.
const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

const WHOLE = /^[1-9]\d{0,19}$/
const SECONDS = /^[1-9]\d*\.\d+$/

// Integer digits → the unit's shift to milliseconds (decimal places): seconds (10 digits now,
// up to 11), milliseconds (13; 12 to 14), microseconds (16; 15 to 17), nanoseconds (19; 18 to 20).
const SHIFT_BY_DIGITS = [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, -3, -3, -3, -6, -6, -6]

/**
 * Epoch milliseconds from the text of an epoch number, its unit told by its count of integer
 * digits: up to 11 seconds (`1700000000`, `1700000000.123`), 12 to 14 milliseconds
 * (`1700000000123`), 15 to 17 microseconds (`1700000000123456`), 18 to 20 nanoseconds
 * (`1700000000123456789`, as Go's zap and envoy write them). Exact: the digits are shifted, never
 * multiplied as floats, and what is below a millisecond is dropped (rounded down, towards the past).
 * Undefined for text that is no number, or a number of more than 20 integer digits.
 *
 * @example epochMs('1700000000123456789') // 1700000000123
 */
export function epochMs(text: string): number | undefined {
  // What logs write, first (a line each): whole digits in any unit, or seconds with a fraction.
  if (WHOLE.test(text)) {
    const shift = SHIFT_BY_DIGITS[text.length] as number
    return shift === 3 ? Number(text) * 1000 : Number(shift === 0 ? text : text.slice(0, shift))
  }
  const dot = text.indexOf('.')
  if (dot > 0 && dot < 12 && SECONDS.test(text))
    return Number(text.slice(0, dot)) * 1000 + Number(`${text.slice(dot + 1, dot + 4)}00`.slice(0, 3))
  const m = NUMBER.exec(text)
  if (m === null) return undefined
  const [, sign, whole, fraction = '', exponent = '0'] = m as unknown as [
    string,
    string,
    string,
    string?,
    string?,
  ]
  // The significant digits, and where the point is among them (the count of integer digits):
  // the exponent moves it (1.7e9 is 1700000000).
  const w = whole.replace(/^0+/, '')
  const all = w + fraction
  const digits = all.replace(/^0+/, '')
  const point = w.length + Number(exponent) - (all.length - digits.length)
  if (digits === '') return 0
  if (point >= SHIFT_BY_DIGITS.length) return undefined
  const int = point <= 0 ? '' : digits.slice(0, point).padEnd(point, '0')
  // Below a thousandth of the unit, only whether something is there counts.
  const frac = point <= 0 ? '0'.repeat(Math.min(-point, 4)) + digits : digits.slice(point)
  const shift = SHIFT_BY_DIGITS[int.length] as number
  // Whole milliseconds (at most 14 digits: exact as a Number), and what is left below one.
  const ms = shift >= 0 ? int + frac.slice(0, shift).padEnd(shift, '0') : int.slice(0, shift)
  const rest = shift >= 0 ? frac.slice(shift) : int.slice(shift) + frac
  const value = Number(ms)
  if (sign !== '-') return value
  return /[1-9]/.test(rest) ? -value - 1 : -value
}
