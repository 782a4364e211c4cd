import { clfParser, NO_REQUEST } from '../replay/clf.js'
import { numberText, quotedValue } from '../replay/json-number.js'
import { forEachLine } from '../replay/lines.js'
import { refusedBeforeRules } from '../replay/record.js'
import { toMs } from '../replay/time.js'
import { counted } from '../report/format.js'
import { UsageError } from '../report/io.js'
import { type Trace, type TraceField, traceBuilder } from './trace.js'

/**
 * Reads a trace file into a `Trace` (times made relative to the first request; fixed windows stay
 * aligned to the epoch). Accepted, detected per line:
 * - an access log line (Common/Combined Log Format): the client IP is the key; its user agent and
 *   query string are kept for the rules that read them;
 * - JSON lines: `{"t": 1200, "key": "alice", "cost": 1, "path": "/login", "method": "POST"}`
 *   (`t`, `time`, `ts` or `timestamp`; `key` or `ip`; optional `ua`, `query` and `host`);
 * - `time,key[,cost]` (comma, tab or space separated; a header line is skipped).
 * A time is read the same way in both (`traceMs`): a number under 10⁹ is milliseconds from the
 * start of the trace, a larger one an epoch time in seconds (10 digits), milliseconds (13),
 * microseconds (16) or nanoseconds (19); or an ISO 8601 or access-log time. A negative or
 * non-finite number is a bad time, and an empty key no key. Malformed lines are counted in `skipped`
 * and reported with their line numbers.
 */
export async function readTrace(
  file: string,
  meta: { limit: number; windowMs: number },
): Promise<{ trace: Trace; skipped: { count: number; first: string[] } }> {
  const b = traceBuilder()
  const clf = clfParser({ ua: true, query: true })
  const skipped = { count: 0, first: [] as string[] }
  const rows: {
    t: number
    key: string
    cost: number
    path: string
    method: string
    fields?: Partial<Record<TraceField, string>>
  }[] = []
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined)
  const skip = (line: number, why: string) => {
    skipped.count++
    if (skipped.first.length < 10) skipped.first.push(`line ${line}: ${why}`)
  }
  await forEachLine(
    file,
    (buf, s, e, line) => {
      if (buf[s] === 0x7b) {
        let o: Record<string, unknown>
        const text = buf.toString('utf8', s, e)
        try {
          o = JSON.parse(text) as Record<string, unknown>
        } catch {
          return skip(line, 'invalid JSON')
        }
        const name = TIME_FIELDS.find((f) => o[f] !== undefined && o[f] !== null)
        const v = name === undefined ? undefined : o[name]
        // Read from the digits as written: JSON.parse's double drops a nanosecond epoch's (past 2^53)
        // and rounds a long fraction (1700000000.9999999 is 1700000001).
        const written = typeof v === 'number' ? numberText(text, name as string, v) : undefined
        const t = traceMs(v, written)
        if (name !== undefined && t === undefined) return skip(line, `bad time ${quotedValue(v, written)}`)
        // The first of key and ip that is there and not empty, as replay picks a field.
        const key = [o.key, o.ip].find((k) => k !== undefined && k !== null && k !== '')
        if (t !== undefined && key === undefined && (o.key === '' || o.ip === ''))
          return skip(line, 'empty key')
        if (t === undefined || (typeof key !== 'string' && typeof key !== 'number'))
          return skip(line, 'expected "t" (or time/ts/timestamp) and "key" (or ip)')
        // As for `time,key,cost` lines: a cost that is there must be a whole number from 1.
        const cost = o.cost ?? 1
        if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1)
          return skip(
            line,
            `bad cost ${typeof cost === 'number' ? numberText(text, 'cost', cost) : JSON.stringify(cost)}`,
          )
        rows.push({
          t,
          key: String(key),
          cost,
          path: typeof o.path === 'string' ? o.path : '/',
          method: typeof o.method === 'string' ? o.method.toUpperCase() : 'GET',
          fields: {
            ua: str(o.ua),
            query: str(o.query)?.replace(/^\?/, ''),
            host: str(o.host)?.toLowerCase(),
          },
        })
        return
      }
      const why = clf.parse(buf, s, e)
      if (why === undefined) {
        const r = clf.record
        // A request serve answers before its rules (CONNECT, `OPTIONS *`, `/%zz`) charges no one, as in replay.
        const refused = refusedBeforeRules(r)
        if (refused !== undefined) return skip(line, refused)
        const fields = { ua: r.ua === '-' ? undefined : r.ua, query: r.query, host: r.host || undefined }
        rows.push({ t: r.ts, key: r.ip, cost: 1, path: r.path, method: r.method, fields })
        return
      }
      if (why === NO_REQUEST) return skip(line, why)
      const parts = buf
        .toString('utf8', s, e)
        .trim()
        // One comma is one separator (`0,,1` has an empty key, not key 1); a run of blanks is one too.
        .split(/[\t ]*,[\t ]*|[\t ]+/)
      const ms = traceMs(parts[0])
      // A first field that starts as a number does but reads as no time (-1000, 1e3) is a bad time,
      // not a header line.
      if (ms === undefined && /^[+-]?\.?\d/.test(parts[0] as string))
        return skip(line, `bad time ${quotedValue(parts[0])}`)
      if (ms === undefined || parts[1] === undefined) {
        if (line === 1) return // a header line
        return skip(line, 'expected an access log line, a JSON object, or time,key[,cost]')
      }
      if (parts[1] === '') return skip(line, 'empty key')
      const cost = parts[2] === undefined ? 1 : Number(parts[2])
      if (!Number.isSafeInteger(cost) || cost < 1) return skip(line, `bad cost ${JSON.stringify(parts[2])}`)
      rows.push({ t: ms, key: parts[1], cost, path: '/', method: 'GET' })
    },
    (line) => skip(line, 'line longer than 1 MiB'),
  )
  if (rows.length === 0)
    throw new UsageError(
      `${file}: no requests found${skipped.first.length > 0 ? ` (${skipped.first.join('; ')})` : ''}`,
    )
  let origin = Number.POSITIVE_INFINITY
  let end = Number.NEGATIVE_INFINITY
  for (const r of rows) {
    if (r.t < origin) origin = r.t
    if (r.t > end) end = r.t
  }
  for (const r of rows) b.add(r.t - origin, b.client(r.key, 'clients'), r.path, r.method, r.cost, r.fields)
  const name = file === '-' ? 'standard input' : (file.split('/').pop() ?? file)
  const trace = b.build({
    name,
    description: `${counted(rows.length, 'request')} from ${name}, in time order`,
    limit: meta.limit,
    windowMs: meta.windowMs,
    durationMs: Math.max(1, end - origin + 1),
    originMs: origin,
  })
  return { trace, skipped }
}

/** Where a JSON line's time is, the first present. */
const TIME_FIELDS = ['t', 'time', 'ts', 'timestamp']

/** Below this a number is milliseconds from the trace's start; from it on, an epoch time (2001 on). */
const RELATIVE_BELOW = 1e9

/**
 * A trace time in ms, the same for JSON and delimited lines: a number (or numeric string) under
 * 10⁹ is milliseconds from the start of the trace; a larger one an epoch time, its unit told by
 * its count of integer digits (10 seconds, 13 milliseconds, 16 microseconds, 19 nanoseconds;
 * `toMs`, which `text`, the number as written, is for); a string otherwise an ISO 8601 or
 * access-log time. Undefined when it is none of these (a negative or non-finite number), or outside
 * the range of dates.
 */
export function traceMs(v: unknown, text?: string): number | undefined {
  // A negative number is no time: not ms before the trace's start, nor an epoch before 1970.
  if (typeof v === 'number' && !(v >= 0 && Number.isFinite(v))) return undefined
  const n =
    typeof v === 'number' ? v : typeof v === 'string' && /^\d+(\.\d+)?$/.test(v) ? Number(v) : undefined
  if (n !== undefined && n < RELATIVE_BELOW) return Math.round(n)
  return toMs(v, text)
}
