import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { epochMs } from './epoch.js'
import { numberText } from './json-number.js'
import { toMs } from './time.js'

describe('epochMs: the unit told by the count of integer digits, exactly', () => {
  test.each([
    // seconds: up to 11 digits
    ['1700000000', 1_700_000_000_000],
    ['1700000000.123', 1_700_000_000_123],
    ['1700000000.9999999999', 1_700_000_000_999],
    ['1700000000.1', 1_700_000_000_100],
    ['99999999999', 99_999_999_999_000],
    ['0', 0],
    ['0.05', 50],
    ['0.0001', 0],
    ['1.7e9', 1_700_000_000_000],
    ['17E8', 1_700_000_000_000],
    // milliseconds: 12 to 14
    ['100000000000', 100_000_000_000],
    ['1700000000123', 1_700_000_000_123],
    ['1700000000123.999', 1_700_000_000_123],
    ['99999999999999', 99_999_999_999_999],
    // microseconds: 15 to 17
    ['100000000000000', 100_000_000_000],
    ['1700000000123456', 1_700_000_000_123],
    ['1700000000123999', 1_700_000_000_123],
    ['1.700000000123999e15', 1_700_000_000_123],
    ['99999999999999999', 99_999_999_999_999],
    // nanoseconds: 18 to 20, past 2^53: digits, never a double
    ['1700000000123456789', 1_700_000_000_123],
    ['1700000000123999999', 1_700_000_000_123],
    ['1700000000999999999', 1_700_000_000_999],
    ['99999999999999999999', 99_999_999_999_999],
    // leading zeros do not count
    ['0001700000000', 1_700_000_000_000],
    // before 1970: rounded down too, towards the past
    ['-1', -1000],
    ['-1.0005', -1001],
    ['-1700000000123456', -1_700_000_000_124],
    ['-1700000000123000', -1_700_000_000_123],
  ])('%s → %d', (text, ms) => {
    expect(epochMs(text)).toBe(ms)
  })

  test.each([
    '100000000000000000000',
    '1e20',
    '1e300',
    'abc',
    '',
    '1.',
    '.5',
    '1e',
    '--1',
    'NaN',
    'Infinity',
  ])('%s is no epoch time', (text) => {
    expect(epochMs(text)).toBeUndefined()
  })

  test('every 16-digit microsecond and 19-digit nanosecond time is its millisecond, integer-divided', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 10n ** 15n, max: 10n ** 16n - 1n }), (us) => {
        expect(epochMs(String(us))).toBe(Number(us / 1000n))
      }),
    )
    fc.assert(
      fc.property(fc.bigInt({ min: 10n ** 18n, max: 10n ** 19n - 1n }), (ns) => {
        expect(epochMs(String(ns))).toBe(Number(ns / 1_000_000n))
        // As a JSON number: the line's own digits, not the double JSON.parse keeps.
        const line = `{"msg":"ts: ${ns}","ts":${ns},"level":"info"}`
        const parsed = JSON.parse(line) as { ts: number }
        expect(toMs(parsed.ts, numberText(line, 'ts', parsed.ts))).toBe(Number(ns / 1_000_000n))
      }),
    )
  })
})

describe('numberText', () => {
  test('the digits of the named field as written, not those in a string, nested too', () => {
    const ns = '1700000000123999999'
    expect(numberText(`{"ts":${ns}}`, 'ts', Number(ns))).toBe(ns)
    expect(numberText(`{"a":"\\"ts\\":${ns}","log":{ "ts" : ${ns} }}`, 'log.ts', Number(ns))).toBe(ns)
    // The double of 1700000000.9999999999 is 1700000001: the text says 999 ms, not the next second.
    const line = '{"ts":1700000000.9999999999}'
    const { ts } = JSON.parse(line) as { ts: number }
    expect(ts).toBe(1_700_000_001)
    expect(numberText(line, 'ts', ts)).toBe('1700000000.9999999999')
    expect(toMs(ts, numberText(line, 'ts', ts))).toBe(1_700_000_000_999)
    expect(numberText('{"ts":1700000000123}', 'ts', 1700000000123)).toBe('1700000000123')
    // A field the line does not show (a key written with escapes): the double's text.
    expect(numberText('{"other":1}', 'ts', 1.5)).toBe('1.5')
    expect(numberText(`{"t\\u0073":${ns}}`, 'ts', Number(ns))).toBe(String(Number(ns)))
  })
})
