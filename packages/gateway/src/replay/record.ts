import { canonicalPath } from '../policy/path.js'

/** One parsed log line: plain data, cheap to copy into the reorder buffer. */
export interface LogRecord {
  /** The line's own time, epoch ms. */
  ts: number
  ip: string
  /** The authenticated user (`authuser` of the Common Log Format), `-` when absent. */
  user: string
  method: string
  /** The request path without its query string. */
  path: string
  status: number
  /** The query string without `?` (decoded only when a rule reads it, else `''`). */
  query: string
  /** The Host, lower-case (JSON lines only; `''` when unknown). */
  host: string
  /** The user agent; decoded only when a rule reads it, else `-`. */
  ua: string
  /** The parsed object of a JSON line (for `field:` keys), else undefined. */
  json: Record<string, unknown> | undefined
  /** Whether the parser counted this line's client address (see `ClfParser.clientCounts`). */
  counted?: boolean
}

/** A record with every field at its empty value: parsers and the reorder buffer refill one each. */
export function emptyRecord(): LogRecord {
  return {
    ts: 0,
    ip: '',
    user: '-',
    method: '',
    path: '',
    status: 0,
    query: '',
    host: '',
    ua: '-',
    json: undefined,
    counted: false,
  }
}

/** `obj[name]` if the line has that field (never an inherited member such as `constructor`). */
function own(obj: object, name: string): unknown {
  return Object.hasOwn(obj, name) ? (obj as Record<string, unknown>)[name] : undefined
}

/** `obj[name]`, else the dotted path `a.b.c`; fields of the line only. */
export function get(obj: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(obj, name)) return obj[name]
  if (!name.includes('.')) return undefined
  let cur: unknown = obj
  for (const part of name.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined
    cur = own(cur, part)
  }
  return cur
}

/** A field value as key text: `-` when absent. */
export function text(v: unknown): string {
  return v === undefined || v === null || v === '' ? '-' : String(v)
}

/**
 * A request header as a log line can tell it: the user agent, and for JSON lines a field
 * `headers.<name>`, `http_<name_with_underscores>` (nginx), `<name>` or `request.headers.<name>`
 * (Caddy). In a `headers` object the name is matched in any case (Caddy writes `X-Api-Key`), and a
 * list of values (Caddy's `["k1"]`) reads as its lines joined with `, `, as the gateway joins them.
 */
export function headerOf(r: LogRecord, name: string): string | undefined {
  if (name === 'user-agent' && r.ua !== '-') return r.ua
  if (r.json === undefined) return undefined
  const v =
    headerIn(get(r.json, 'headers'), name) ??
    get(r.json, `headers.${name}`) ??
    own(r.json, `http_${name.replace(/-/g, '_')}`) ??
    own(r.json, name) ??
    headerIn(get(r.json, 'request.headers'), name) ??
    get(r.json, `request.headers.${name}`)
  const value = Array.isArray(v) ? (v.length === 0 ? undefined : v.join(', ')) : v
  return value === undefined || value === null || value === '' ? undefined : String(value)
}

/** A header of a logged `headers` object, its name in any case (own fields only). */
function headerIn(headers: unknown, name: string): unknown {
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) return undefined
  if (Object.hasOwn(headers, name)) return (headers as Record<string, unknown>)[name]
  for (const k of Object.keys(headers))
    if (k.length === name.length && k.toLowerCase() === name) return (headers as Record<string, unknown>)[k]
  return undefined
}

/** Why a request the gateway answers before its rules is not decided (see `refusedBeforeRules`). */
export const CONNECT_REFUSED = 'CONNECT (the gateway answers 405 before its rules)'
export const BAD_TARGET =
  'bad target (the gateway answers 400 before its rules: no path, or a "%" without two hex digits)'

/**
 * Why the gateway would answer a logged request before any rule sees it, else undefined: a
 * CONNECT (405: it opens no tunnels), or a target it refuses (400: `*`, anything that is no path
 * once an absolute form's authority is gone, a `%` not followed by two hex digits in the path).
 * A record without a logged path (`-`) is kept.
 *
 * @example refusedBeforeRules({ ...emptyRecord(), method: 'GET', path: '/%zz' }) // BAD_TARGET
 */
export function refusedBeforeRules(r: LogRecord): string | undefined {
  if (r.method === 'CONNECT') return CONNECT_REFUSED
  const path = r.path
  if (path === '-') return undefined
  const c = path.charCodeAt(0)
  if (c !== 47 /* / */ && c !== 92 /* \ */) return BAD_TARGET
  return path.includes('%') && canonicalPath(path) === undefined ? BAD_TARGET : undefined
}
