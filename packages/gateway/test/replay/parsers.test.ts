// Bad input never crashes replay: any line (a real log line edited at random, random bytes, random
// JSON) is either a record with well-formed fields or a reason why it is malformed, never a throw.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { clfParser } from '../../src/replay/clf.js'
import { jsonParser } from '../../src/replay/json-line.js'
import type { LogRecord } from '../../src/replay/record.js'

const SAMPLE = path.resolve(__dirname, '../../../../../shared/data/apache_access_sample.log')
const LINES = readFileSync(SAMPLE, 'utf8').split('\n').filter(Boolean).slice(0, 500)

/** A line of the sample with up to six random edits (a cut, an insertion, or both). */
const edited = fc
  .tuple(
    fc.constantFrom(...LINES),
    fc.array(fc.tuple(fc.nat(400), fc.nat(8), fc.string({ maxLength: 6 })), { maxLength: 6 }),
  )
  .map(([line, edits]) =>
    edits.reduce((s, [at, cut, insert]) => {
      const i = at % (s.length + 1)
      return s.slice(0, i) + insert + s.slice(i + cut)
    }, line),
  )

/** What every record a parser says it read must hold. */
function wellFormed(r: LogRecord): void {
  expect(Number.isSafeInteger(r.ts), `ts ${r.ts}`).toBe(true)
  for (const field of ['ip', 'user', 'method', 'path', 'query', 'host', 'ua'] as const)
    expect(typeof r[field], field).toBe('string')
  // A status code (100–999) as the line gives it, or 0 when it gives none that is one.
  expect(
    r.status === 0 || (Number.isInteger(r.status) && r.status >= 100 && r.status <= 999),
    `status ${r.status}`,
  ).toBe(true)
}

describe('log line parsers', () => {
  test.each([
    ['default', {}],
    ['user agent, query and client counts', { ua: true, query: true, countClients: true }],
  ])('Common/Combined (%s): a record or a reason for every line (property)', (_name, needs) => {
    const parser = clfParser(needs)
    const line = fc.oneof(
      edited.map((s) => Buffer.from(s, 'utf8')),
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
    )
    fc.assert(
      fc.property(line, (buf) => {
        const reason = parser.parse(buf, 0, buf.length)
        if (reason === undefined) wellFormed(parser.record)
        else expect(typeof reason).toBe('string')
      }),
      { numRuns: 5000 },
    )
    // The sample itself parses.
    const ok = LINES.filter((l) => parser.parse(Buffer.from(l), 0, Buffer.byteLength(l)) === undefined)
    expect(ok.length).toBeGreaterThan(LINES.length * 0.99)
  })

  test('JSON lines: a record or a reason for every line (property)', () => {
    const parser = jsonParser({}, { ua: true, query: true })
    const value = fc.oneof(fc.string(), fc.integer(), fc.double(), fc.constant(null), fc.boolean())
    const record = fc
      .record(
        {
          ip: value,
          remote_addr: value,
          time: fc.oneof(
            value,
            fc.bigInt().map(String),
            fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          ),
          timestamp: value,
          method: value,
          path: value,
          uri: value,
          request: value,
          status: value,
          user_agent: value,
          host: value,
        },
        { requiredKeys: [] },
      )
      .map((o) => JSON.stringify(o))
    const line = fc.oneof(record, fc.json(), fc.string())
    fc.assert(
      fc.property(line, (text) => {
        const reason = parser.parse(text)
        if (reason === undefined) wellFormed(parser.record)
        else expect(typeof reason).toBe('string')
      }),
      { numRuns: 5000 },
    )
  })
})
