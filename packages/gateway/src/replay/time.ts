import { epochMs } from './epoch.js'

/** The Date range: ±100,000,000 days from the epoch, in ms. */
const MAX_MS = 8.64e15

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']

// 2015-05-17, then optionally T (or a space) 10:05[:03[.123]], then optionally Z, ±05, ±0530 or
// ±05:30; or, after a space, ±0000, UTC or GMT (Ruby's and Rails' `2015-05-17 10:05:03 +0000`),
// the offset followed by its zone's name as Go's time.String writes it (`+0000 UTC`).
const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz]| UTC| GMT)|\x20?([+-])(\d{2})(?::?(\d{2}))?(?: [A-Z]{3,5})?)?)?$/
// 17/May/2015:10:05:03 +0000, the access-log time.
const CLF = /^(\d{2})\/([A-Za-z]{3})\/(\d{4}):(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? ([+-])(\d{2})(\d{2})$/
// Sun, 17 May 2015 10:05:03 GMT, the HTTP date, or with an offset as mail writes it (RFC 5322).
const HTTP_DATE =
  /^(?:[A-Za-z]{3}, )?(\d{1,2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) (?:GMT|UTC|([+-])(\d{2})(\d{2}))$/

/**
 * The epoch ms of a calendar time and its offset east of UTC in minutes, or undefined when a field
 * is out of range (31 February, 25:00, an offset beyond ±23:59).
 */
function civil(
  y: number,
  mo: number,
  d: number,
  h: number,
  mi: number,
  s: number,
  fraction: string | undefined,
  offsetMin: number,
): number | undefined {
  if (mo < 0 || mo > 11 || d < 1 || h > 23 || mi > 59 || s > 60 || Math.abs(offsetMin) > 23 * 60 + 59)
    return undefined
  // Not Date.UTC: it reads years 0–99 as 1900–1999.
  const base = new Date(0)
  base.setUTCFullYear(y, mo, d)
  if (base.getUTCDate() !== d) return undefined
  const ms = fraction === undefined ? 0 : Math.floor(Number(`0.${fraction}`) * 1000)
  return base.getTime() + h * 3_600_000 + mi * 60_000 + s * 1000 + ms - offsetMin * 60_000
}

/** Minutes east of UTC of `±hh[mm]`; a time without an offset is UTC. */
function offset(sign: string | undefined, hh: string | undefined, mm: string | undefined): number {
  if (sign === undefined) return 0
  const minutes = Number(hh) * 60 + Number(mm ?? 0)
  return sign === '-' ? -minutes : minutes
}

function dateString(v: string): number | undefined {
  const iso = ISO.exec(v)
  if (iso !== null) {
    const [, y, mo, d, h, mi, s, f, , sign, oh, om] = iso
    return civil(
      Number(y),
      Number(mo) - 1,
      Number(d),
      Number(h ?? 0),
      Number(mi ?? 0),
      Number(s ?? 0),
      f,
      offset(sign, oh, om),
    )
  }
  const clf = CLF.exec(v)
  if (clf !== null) {
    const [, d, mon, y, h, mi, s, f, sign, oh, om] = clf
    const mo = MONTHS.indexOf((mon as string).toLowerCase())
    return civil(Number(y), mo, Number(d), Number(h), Number(mi), Number(s), f, offset(sign, oh, om))
  }
  const http = HTTP_DATE.exec(v)
  if (http !== null) {
    const [, d, mon, y, h, mi, s, sign, oh, om] = http
    const mo = MONTHS.indexOf((mon as string).toLowerCase())
    return civil(Number(y), mo, Number(d), Number(h), Number(mi), Number(s), undefined, offset(sign, oh, om))
  }
  return undefined
}

/**
 * Epoch ms from an epoch number (a number, or a string of digits), its unit told by its count of
 * integer digits (`epochMs`: 10 seconds, 13 milliseconds, 16 microseconds, 19 nanoseconds); or from
 * an ISO 8601 time (`2015-05-17T10:05:03.123+05:30`; a space for the `T` too; without an offset,
 * UTC, whatever the machine's time zone), an access-log time (`17/May/2015:10:05:03 +0000`) or an
 * HTTP or mail date (`Sun, 17 May 2015 10:05:03 GMT`, `… +0000`). Undefined for anything else (no guessing at free
 * text), and for a time outside the Date range (it could not be shown, or bucketed in the timeline).
 * A number past 2^53 (nanoseconds) has lost digits in `JSON.parse`: `text` is the number as written
 * (`numberText`), read instead.
 *
 * @example toMs('2015-05-17T10:05:03Z') // 1431857103000
 * @example toMs('1431857103123456') // 1431857103123
 */
export function toMs(v: unknown, text?: string): number | undefined {
  if (typeof v !== 'number' && (typeof v !== 'string' || v.length === 0)) return undefined
  const ms =
    typeof v === 'number'
      ? epochMs(text ?? String(v))
      : /^\d+(\.\d+)?$/.test(v)
        ? epochMs(v)
        : dateString(v.trim())
  return ms !== undefined && Math.abs(ms) <= MAX_MS ? ms : undefined
}
