import { type Needs, NO_REQUEST } from './clf.js'
import { numberText, quotedValue } from './json-number.js'
import { emptyRecord, get, type LogRecord, text } from './record.js'
import { toMs } from './time.js'

/** Where each record field is read from in a JSON line: candidate names, first present wins. */
export interface JsonFields {
  time: readonly string[]
  ip: readonly string[]
  user: readonly string[]
  method: readonly string[]
  path: readonly string[]
  status: readonly string[]
  userAgent: readonly string[]
  host: readonly string[]
  query: readonly string[]
}

/** The field names tried by default (nginx `escape=json`, Caddy, Envoy, ALB-style names). */
export const DEFAULT_FIELDS: JsonFields = {
  time: ['time', 'timestamp', '@timestamp', 'ts', 'date', 'time_local', 'time_iso8601', 'msec', 'start_time'],
  ip: [
    'ip',
    'remote_addr',
    'remoteAddr',
    'client_ip',
    'clientIp',
    'remote_ip',
    'client',
    'request.remote_ip',
  ],
  user: ['user', 'remote_user', 'remoteUser', 'user_id', 'userId'],
  method: ['method', 'request_method', 'verb', 'request.method'],
  path: ['path', 'uri', 'request_uri', 'url', 'request.uri', 'request'],
  status: ['status', 'status_code', 'statusCode', 'response', 'response.status'],
  userAgent: ['user_agent', 'userAgent', 'http_user_agent', 'agent', 'ua', 'request.headers.User-Agent'],
  host: ['host', 'http_host', 'server_name', 'request.host'],
  query: ['query', 'query_string', 'args', 'request.query'],
}

/** A JSON-lines parser with its reusable record. */
export interface JsonParser {
  readonly record: LogRecord
  /** Parses one line; returns undefined on success, else why the line is malformed. */
  parse(line: string): string | undefined
}

/**
 * Creates a JSON-lines parser. `overrides` replaces the candidates of a field
 * (`--field time=ts` on the command line).
 */
export function jsonParser(overrides: Partial<JsonFields> = {}, needs: Needs = {}): JsonParser {
  const fields: JsonFields = { ...DEFAULT_FIELDS, ...overrides }
  const record: LogRecord = { ...emptyRecord(), ip: '-', method: '-', path: '-' }

  function parse(line: string): string | undefined {
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      return 'invalid JSON'
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      return 'JSON line is not an object'
    const obj = value as Record<string, unknown>
    record.json = obj
    const name = fields.time.find((n) => present(get(obj, n)))
    if (name === undefined) return `no time field (tried ${fields.time.join(', ')})`
    const t = get(obj, name)
    // Read from the digits as written: JSON.parse's double drops a nanosecond epoch's (past 2^53)
    // and rounds a long fraction (1700000000.9999999 is 1700000001).
    const digits = typeof t === 'number' ? numberText(line, name, t) : undefined
    const ts = toMs(t, digits)
    if (ts === undefined) return `bad time ${quotedValue(t, digits)}`
    record.ts = ts
    record.ip = text(pick(obj, fields.ip))
    record.user = text(pick(obj, fields.user))
    let method = text(pick(obj, fields.method))
    let path = text(pick(obj, fields.path))
    // A request field the line has, empty (nginx's `"request": ""` for a connection that sent
    // none): the access-log `""`, no request a rule would see. A line with no such field is kept.
    if (path === '-' && fields.path.some((f) => get(obj, f) === '' || get(obj, f) === '-')) return NO_REQUEST
    // `request` may be a whole request line: "GET /x HTTP/1.1".
    const space = path.indexOf(' ')
    if (space > 0) {
      if (method === '-') method = path.slice(0, space)
      const rest = path.slice(space + 1)
      const end = rest.indexOf(' ')
      path = end < 0 ? rest : rest.slice(0, end)
    }
    // An absolute-form target: its path, and its authority as the Host (which the gateway requires).
    const authority = ABSOLUTE.exec(path)
    if (authority !== null) {
      path = path.slice(authority[0].length)
      if (!path.startsWith('/')) path = `/${path}`
    }
    const q = path.indexOf('?')
    record.method = method.toUpperCase()
    record.path = q < 0 ? path : path.slice(0, q)
    // A status code as the Common Log Format has it (100–999), else 0: not known.
    const status = Number(pick(obj, fields.status) ?? 0)
    record.status = Number.isInteger(status) && status >= 100 && status <= 999 ? status : 0
    const host = pick(obj, fields.host)
    record.host =
      host !== undefined
        ? String(host).toLowerCase()
        : authority !== null
          ? (authority[1] as string).toLowerCase()
          : ''
    const query = pick(obj, fields.query)
    record.query = query !== undefined ? String(query).replace(/^\?/, '') : q < 0 ? '' : path.slice(q + 1)
    record.ua = needs.ua === true ? text(pick(obj, fields.userAgent)) : '-'
    return undefined
  }

  return { record, parse }
}

/** `http://host` or `https://host` (any case) opening a target; the authority captured. */
const ABSOLUTE = /^https?:\/\/([^/?#]*)/i

const present = (v: unknown) => v !== undefined && v !== null && v !== ''

function pick(obj: Record<string, unknown>, names: readonly string[]): unknown {
  for (const n of names) {
    const v = get(obj, n)
    if (present(v)) return v
  }
  return undefined
}
