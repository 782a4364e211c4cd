import { type ClientTable, clientTable, interner } from './intern.js'
import { emptyRecord, type LogRecord } from './record.js'

/**
 * A Common / Combined Log Format parser working on bytes: one line `buf[s, e)` at a time, with no
 * regular expression and no string for the parts no rule reads. Strings it makes are fresh copies
 * (never slices of the read buffer), so keys kept by the store do not pin read chunks in memory.
 *
 * `host ident authuser [dd/Mon/yyyy:HH:MM:SS ±hhmm] "METHOD path PROTO" status bytes ["referer" "agent"]`
 */
export interface ClfParser {
  /** The record filled by the last successful `parse`. */
  readonly record: LogRecord
  /** Parses one line; returns undefined on success, else why the line is malformed. */
  parse(buf: Buffer, s: number, e: number): string | undefined
  /**
   * Lines parsed per client address (with `countClients`): those whose record says `counted`
   * (all of them up to 262,144 distinct addresses).
   */
  clientCounts(): Map<string, number>
}

/** Why a line that logs a connection without a request is not decided. */
export const NO_REQUEST = 'no request ("-" or "": the connection sent none)'

const SPACE = 0x20
const QUOTE = 0x22
const BACKSLASH = 0x5c
const LBRACKET = 0x5b
const RBRACKET = 0x5d
const QMARK = 0x3f
const SLASH = 0x2f

const MONTHS = new Map<number, number>()
;['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'].forEach((m, i) => {
  for (const v of [m, m[0]?.toUpperCase() + m.slice(1), m.toUpperCase()]) {
    MONTHS.set((v.charCodeAt(0) << 16) | (v.charCodeAt(1) << 8) | v.charCodeAt(2), i)
  }
})

/** What to decode beyond the client, user, method, path and status. */
export interface Needs {
  readonly ua?: boolean
  readonly query?: boolean
  /** Count the lines of each client address (read with `clientCounts`). */
  readonly countClients?: boolean
}

/** Creates a parser with its reusable record. */
export function clfParser(needs: Needs = {}): ClfParser {
  const withUa = needs.ua === true
  const withQuery = needs.query === true
  let buf: Buffer = Buffer.alloc(0)
  let uaS = 0
  let uaE = 0
  // The epoch ms of the last line's day and zone: most lines share it, and Date.UTC is not free.
  let dayKey = -1
  let dayBase = 0
  // Counting clients: every address held and counted (no eviction); else a bounded cache.
  const counting = needs.countClients === true
  const ips = counting ? clientTable() : interner(1 << 17, 128)
  const paths = interner(1 << 14)
  const record: LogRecord = emptyRecord()

  const digit = (p: number) => {
    const c = (buf[p] as number) - 48
    return c >= 0 && c <= 9 ? c : -100
  }
  const two = (p: number) => digit(p) * 10 + digit(p + 1)

  /** Parses the time at `p` (just after `[`); returns the index of `]`, or -1. */
  function time(p: number, e: number): number {
    if (p + 26 > e || buf[p + 2] !== 0x2f || buf[p + 6] !== 0x2f || buf[p + 11] !== 0x3a) return -1
    const day = two(p)
    const month = MONTHS.get(
      ((buf[p + 3] as number) << 16) | ((buf[p + 4] as number) << 8) | (buf[p + 5] as number),
    )
    // Each pair checked alone: a letter in the second (`201x`) must not be borrowed from the first.
    const century = two(p + 7)
    const yy = two(p + 9)
    const year = century < 0 || yy < 0 ? -1 : century * 100 + yy
    const h = two(p + 12)
    const m = two(p + 15)
    const sec = two(p + 18)
    if (
      month === undefined ||
      day < 1 ||
      day > 31 ||
      year < 0 ||
      h < 0 ||
      h > 23 ||
      m < 0 ||
      m > 59 ||
      sec < 0 ||
      sec > 60
    )
      return -1
    if (buf[p + 14] !== 0x3a || buf[p + 17] !== 0x3a) return -1
    let q = p + 20
    let ms = 0
    if (buf[q] === 0x2e) {
      // Fractional seconds (some servers log them): keep milliseconds.
      let scale = 100
      for (q++; q < e && digit(q) >= 0; q++) {
        ms += digit(q) * scale
        scale /= 10
      }
      ms = Math.floor(ms)
    }
    if (q + 6 >= e || buf[q] !== SPACE) return -1
    const sign = buf[q + 1] === 0x2d ? -1 : buf[q + 1] === 0x2b ? 1 : 0
    const zh = two(q + 2)
    const zm = two(q + 4)
    // An offset is at most 23:59 (ISO 8601); beyond it, it would be read as days away.
    if (sign === 0 || zh < 0 || zh > 23 || zm < 0 || zm > 59 || buf[q + 6] !== RBRACKET) return -1
    const zone = sign * (zh * 60 + zm)
    const key = ((year * 16 + month) * 32 + day) * 4096 + zone + 2048
    if (key !== dayKey) {
      const base = Date.UTC(year, month, day)
      if (new Date(base).getUTCDate() !== day) return -1
      dayKey = key
      dayBase = base - zone * 60_000
    }
    record.ts = dayBase + h * 3_600_000 + m * 60_000 + sec * 1000 + ms
    return q + 6
  }

  /** The index of the closing quote of a quoted field opened at `p - 1`, honouring `\"`. */
  function closing(p: number, e: number): number {
    for (let i = p; i < e; i++) {
      const c = buf[i]
      if (c === QUOTE) return i
      if (c === BACKSLASH) i++
    }
    return -1
  }

  function parse(b: Buffer, s: number, e: number): string | undefined {
    buf = b
    uaS = uaE = 0
    // Short fields are scanned in JavaScript: cheaper than a native indexOf call each.
    let p = s
    while (p < e && b[p] !== SPACE) p++
    if (p === s || p >= e) return 'not a Common/Combined Log Format line'
    const ipEnd = p
    // ident, then authuser (which may not contain a space), then the time.
    let identEnd = p + 1
    while (identEnd < e && b[identEnd] !== SPACE) identEnd++
    if (identEnd >= e) return 'not a Common/Combined Log Format line'
    let userEnd = identEnd + 1
    while (userEnd < e && b[userEnd] !== SPACE) userEnd++
    if (userEnd >= e || b[userEnd + 1] !== LBRACKET) return 'not a Common/Combined Log Format line'
    p = time(userEnd + 2, e)
    if (p < 0) return 'bad timestamp'
    if (b[p + 1] !== SPACE || b[p + 2] !== QUOTE) return 'missing request'
    const reqS = p + 3
    const reqE = closing(reqS, e)
    if (reqE < 0) return 'unterminated request'
    // `"-"` (Apache) or `""` (nginx): a connection that sent no request (a browser's preconnect
    // timing out, 408 or 400). No rule of a gateway would see it.
    if (reqE === reqS || (reqE === reqS + 1 && b[reqS] === 0x2d)) return NO_REQUEST
    if (b[reqE + 1] !== SPACE) return 'missing status'
    const st = reqE + 2
    if (st + 3 > e) return 'bad status'
    const status = digit(st) * 100 + digit(st + 1) * 10 + digit(st + 2)
    if (status < 100 || (st + 3 < e && b[st + 3] !== SPACE)) return 'bad status'
    // The request line: method, then the target up to a space, the query or the end.
    let m = reqS
    while (m < reqE && b[m] !== SPACE) m++
    let t = m + 1
    let tEnd = t
    for (; tEnd < reqE; tEnd++) {
      const c = b[tEnd]
      if (c === SPACE || c === QMARK) break
    }
    if (t > reqE) t = tEnd = reqE
    // An absolute-form target (`http://host/path`, as a client sends it to a proxy): the gateway
    // reads its path, and its authority as the Host (which it must equal).
    let hostS = 0
    let hostE = 0
    if (b[t] !== SLASH && tEnd - t > 7) {
      const at = authorityAt(b, t, tEnd)
      if (at > 0) {
        hostS = at
        for (hostE = at; hostE < tEnd && b[hostE] !== SLASH; hostE++);
        t = hostE
      }
    }
    let qEnd = tEnd
    if (withQuery && b[tEnd] === QMARK) {
      while (qEnd < reqE && b[qEnd] !== SPACE) qEnd++
    }
    // Referer and agent, when present (combined format): `"referer" "agent"` after the size.
    const size = withUa ? b.indexOf(SPACE, st + 3) : -1
    if (size >= 0 && size < e) {
      const rS = b.indexOf(SPACE, size + 1)
      if (b[size + 1] !== QUOTE) {
        if (rS >= 0 && rS < e && b[rS + 1] === QUOTE) {
          const refE = closing(rS + 2, e)
          if (refE > 0 && b[refE + 1] === SPACE && b[refE + 2] === QUOTE) {
            uaS = refE + 3
            uaE = closing(uaS, e)
            if (uaE < 0) uaS = uaE = 0
          }
        }
      }
    }
    record.ip = ips.get(b, s, ipEnd)
    if (counting) record.counted = (ips as ClientTable).counted
    record.user =
      userEnd - identEnd === 2 && b[identEnd + 1] === 0x2d ? '-' : b.toString('utf8', identEnd + 1, userEnd)
    record.method = method(b, reqS, m)
    record.path = tEnd > t ? paths.get(b, t, tEnd) : hostE > 0 ? '/' : '-'
    record.host = hostE > hostS ? b.toString('latin1', hostS, hostE).toLowerCase() : ''
    record.status = status
    if (withQuery) record.query = qEnd > tEnd ? b.toString('utf8', tEnd + 1, qEnd) : ''
    if (withUa) record.ua = uaE > uaS ? b.toString('utf8', uaS, uaE) : '-'
    return undefined
  }

  return { record, parse, clientCounts: () => (counting ? (ips as ClientTable).counts() : new Map()) }
}

/** Where the authority of a target `http://` or `https://` (any case) at `s` starts, else -1. */
function authorityAt(b: Buffer, s: number, e: number): number {
  const lower = (i: number) => (b[i] as number) | 0x20
  if (lower(s) !== 0x68 || lower(s + 1) !== 0x74 || lower(s + 2) !== 0x74 || lower(s + 3) !== 0x70) return -1
  let p = s + 4
  if (lower(p) === 0x73) p++
  return p + 3 <= e && b[p] === 0x3a && b[p + 1] === SLASH && b[p + 2] === SLASH ? p + 3 : -1
}

const COMMON = ['GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']

/** The method, interned for the common ones (no new string per line). */
function method(b: Buffer, s: number, e: number): string {
  for (const m of COMMON) {
    if (m.length === e - s) {
      let same = true
      for (let i = 0; i < m.length; i++) {
        if (m.charCodeAt(i) !== b[s + i]) {
          same = false
          break
        }
      }
      if (same) return m
    }
  }
  return b.toString('latin1', s, e)
}
