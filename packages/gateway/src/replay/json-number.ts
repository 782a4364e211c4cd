/** What a JSON number is written with: digits . e E + - */
const isNumberChar = (c: number) =>
  (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0d

/**
 * The text of the number `value` that a JSON line gives the field `name` (the last part of a
 * dotted path: `ts` of `log.ts`), as written: `JSON.parse` keeps only the nearest double, which
 * for an epoch in nanoseconds (19 digits, past 2^53) or a time with many decimals
 * (`1700000000.9999999999` is the double 1700000001) is not the number written. `"ts"` followed
 * by `:` cannot be inside a string (its quotes would be escaped there); the text found must also
 * read as `value`. Without such a field (a key written with escapes), `String(value)`.
 *
 * @example numberText('{"ts":1700000000123456789}', 'ts', 1700000000123456800) // '1700000000123456789'
 */
export function numberText(line: string, name: string, value: number): string {
  const quoted = `"${name.slice(name.lastIndexOf('.') + 1)}"`
  for (let at = line.indexOf(quoted); at >= 0; at = line.indexOf(quoted, at + 1)) {
    let i = at + quoted.length
    while (isSpace(line.charCodeAt(i))) i++
    if (line.charCodeAt(i) !== 0x3a) continue
    i++
    while (isSpace(line.charCodeAt(i))) i++
    const start = i
    while (isNumberChar(line.charCodeAt(i))) i++
    const text = line.slice(start, i)
    if (text !== '' && Number(text) === value) return text
  }
  return String(value)
}

/**
 * A malformed line's value as its reason quotes it, up to 40 characters: a JSON number as written
 * (`1e400`, which `JSON.parse` reads as Infinity and `JSON.stringify` writes `null`), anything
 * else as JSON (control characters escaped).
 *
 * @example `bad time ${quotedValue(Infinity, '1e400')}` // 'bad time 1e400'
 */
export function quotedValue(value: unknown, written?: string): string {
  return (written ?? JSON.stringify(value)).slice(0, 40)
}
