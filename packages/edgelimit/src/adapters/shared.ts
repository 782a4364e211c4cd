import { describe, EdgelimitError } from '../errors.js'

/**
 * Whether a response of this status has no content (RFC 9110 §15.3.5, §15.3.6, §15.4.5): an
 * `onLimited` answer of 204, 205 or 304 is sent without its body (a Web `Response` would throw).
 */
export const bodiless = (status: number): boolean => [204, 205, 304].includes(status)

/**
 * Whether `fetch()` decoded the body of a response with these headers: gzip, x-gzip, deflate or br,
 * which Node, Deno and Bun all decode. A copy of such a response is sent without its
 * `content-encoding` and `content-length` (Deno sent the decoded bytes as gzip); any other coding
 * (zstd in Node 20 and Deno, aes128gcm…) is handed over as it came and keeps both.
 */
export function decodedByFetch(headers: Headers): boolean {
  // No field reads as 'null': no match.
  return /^((x-)?gzip|deflate|br)$/i.test(headers.get('content-encoding') as string)
}

/**
 * Resolves after `ms` milliseconds: how adapters hold a shaped request (`HttpVerdict.delayMs`).
 * Callers skip it when `ms` is 0, to stay synchronous. A timer takes at most 2^31 - 1 ms (about
 * 24.8 days) and fires a longer one at once (Node, Deno, browsers): a longer hold is waited in parts.
 */
export function sleep(ms: number): Promise<void> {
  // deadline.ts's MAX_TIMER, written again: importing it brings the deadline code into the edge bundle.
  const most = 2 ** 31 - 1
  return ms > most
    ? sleep(most).then(() => sleep(ms - most))
    : new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * A failed check as a framework's error path takes it. Express reads `next(undefined)`,
 * `next(null)`, `next(0)` or `next('')` as "no error" and `next('route')` / `next('router')` as
 * orders, Fastify `done(undefined)` / `done(null)` as "go on", and Hono hands no such value to
 * `onError` unless it is an `Error` (the app's promise rejects with it instead: a plain object
 * too): passed on as they are, a key (or cost, skip, onLimited) function that throws `undefined`
 * or rejects with no reason would let the request through unlimited. A thrown value that is not
 * an `Error` is therefore passed on as an `EdgelimitError` (`ERR_EDGELIMIT_THROWN`, the value as
 * its `cause`); errors go on as they are.
 */
export function checkFailure(reason: unknown): Error {
  if (reason instanceof Error) return reason
  const error = new EdgelimitError(
    'ERR_EDGELIMIT_THROWN',
    `The rate-limit check failed with ${describe(reason)}, not an Error (thrown or rejected by a key, cost, skip or onLimited function)`,
  )
  error.cause = reason
  return error
}

/**
 * Adds rate-limit fields to a response that may carry its own (the handler's quota, a proxied
 * upstream's), through `write`. None of the response's is replaced, which could tell the client
 * of a more permissive policy than its own (draft-10 §7.2). A draft-10 list (`"name";…`) is appended to the response's draft-10 list. Any
 * other group of fields (draft-7's two, draft-6's four, legacy's three) describes one policy:
 * when the response has a field of the group (or a draft-10 field in another form), the whole
 * group stays as the response has it, without ours, rather than a limit from one policy beside a
 * remaining from another. A field the response has as ours already is left as it is.
 */
export function addFields(
  headers: Headers,
  fields: readonly (readonly [string, string])[],
  write: Pick<Headers, 'append' | 'set'> = headers,
): void {
  // Groups by bit: 1 the standard's fields, 2 legacy's (`x-ratelimit-…`); set: the response's.
  let kept = 0
  for (const [name, value] of fields) {
    const had = headers.get(name)
    if (had !== null && (value[0] !== '"' || had[0] !== '"')) kept |= name[0] === 'x' ? 2 : 1
  }
  for (const [name, value] of fields) {
    const had = headers.get(name)
    if (had !== value && !(kept & (name[0] === 'x' ? 2 : 1)))
      write[had === null ? 'set' : 'append'](name, value)
  }
}

/**
 * An answer's fields by name (lower case), in order of first appearance: a repeated name (two
 * `set-cookie`) keeps every value, for the adapter to send each (an `onLimited` answer may have
 * them; `HttpAnswer.headers` is a list of pairs).
 */
export function fieldValues(fields: readonly (readonly [string, string])[]): Map<string, string[]> {
  const byName = new Map<string, string[]>()
  for (const [name, value] of fields) {
    const lower = name.toLowerCase()
    const values = byName.get(lower)
    if (values === undefined) byName.set(lower, [value])
    else values.push(value)
  }
  return byName
}

/**
 * Whether `fields` name one field twice, in any case (two `set-cookie`): only then must an adapter
 * group their values (`fieldValues`, a Map and an array per name); else it sends each pair as it
 * is, the name in lower case. Lengths are compared first: the default answer's names all differ in
 * length, so no name is lower-cased for the check.
 */
export function repeatsName(fields: readonly (readonly [string, string])[]): boolean {
  for (let i = 1; i < fields.length; i++) {
    const name = (fields[i] as readonly [string, string])[0]
    for (let j = 0; j < i; j++) {
      const other = (fields[j] as readonly [string, string])[0]
      if (other.length === name.length && lowerName(other) === lowerName(name)) return true
    }
  }
  return false
}

// RFC 9110 §5.1 and §5.5 as Node checks them: a name is a token; a value has no control character
// but tab and no character above U+00FF (HTTP/1.1 sends Latin-1 bytes; `–` is no byte).
const TOKEN = /^[!#$%&'*+.^_`|~\w-]+$/
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/**
 * Checks an answer's fields before any of them is set: one HTTP cannot carry (a line break, a
 * character above U+00FF, a name that is no token, a value that is neither a string nor a number)
 * would fail in Node's `setHeader` halfway through a denial, after its status and some of its
 * fields were set (Express's error page then went out as a 429, Fastify's and Node's 500s with the
 * denial's `retry-after`), so the denial fails first, with `ERR_EDGELIMIT_ON_LIMITED`, and the
 * framework's error path answers a clean 500. Numbers pass, as Node and `Headers` take them.
 */
function checkFields(fields: readonly (readonly [string, string])[]): void {
  for (const field of fields) {
    const [name, value] = Array.isArray(field) ? (field as readonly unknown[]) : []
    if (
      typeof name !== 'string' ||
      !TOKEN.test(name) ||
      (typeof value !== 'number' && (typeof value !== 'string' || !FIELD_VALUE.test(value)))
    )
      throw new EdgelimitError(
        'ERR_EDGELIMIT_ON_LIMITED',
        `The onLimited answer has a field HTTP cannot carry: ${describe(name)}: ${describe(value)}; a name is a token, a value a string without line breaks, control characters or characters above U+00FF`,
      )
  }
}

/**
 * Sends a denial's fields through `set(target, name, value)`: pair by pair, names lower case, or,
 * when the answer repeats a name (two `set-cookie`), each name once with every value. `set` is a
 * module-level function, so a denial allocates no closure.
 */
export function sendFields<T>(
  target: T,
  fields: readonly (readonly [string, string])[],
  set: (target: T, name: string, value: string | string[]) => unknown,
): void {
  checkFields(fields)
  if (repeatsName(fields)) {
    for (const [name, values] of fieldValues(fields))
      set(target, name, values.length === 1 ? (values[0] as string) : values)
    return
  }
  for (let i = 0; i < fields.length; i++) {
    const h = fields[i] as readonly [string, string]
    set(target, lowerName(h[0]), h[1])
  }
}

const lowerNames = new Map<string, string>()

/**
 * A field name in lower case, as `Headers` and Fastify's `reply.header` store it (and send it):
 * passing it lower case already spares them a new string per field, and the name is a property
 * or map key they have seen before. Names are the HTTP layer's few constants (and an
 * `onLimited` answer's), so the cache stays small; it stops growing at 64 entries.
 */
export function lowerName(name: string): string {
  let lower = lowerNames.get(name)
  if (lower === undefined) {
    // Keys come back internalized: later stores under this exact string take the fast path.
    lower = Object.keys({ [name.toLowerCase()]: 0 })[0] as string
    if (lowerNames.size < 64) lowerNames.set(name, lower)
  }
  return lower
}

/**
 * The path of a request target (`/a/b?x=1` → `/a/b`); `/` when there is none. An absolute-form
 * target (`http://host/a?x=1`, which Node hands over as `req.url` and Express routes as `/a`)
 * gives its path too, so that routes cannot be dodged by naming the host.
 */
export function pathOf(target: string | undefined): string {
  if (target === undefined || target === '') return '/'
  const start =
    target.charCodeAt(0) === 47 /* / */ ? 0 : (/^[a-z][\w+.-]*:\/\/[^/?#]*/i.exec(target)?.[0].length ?? 0)
  for (let i = start; i < target.length; i++) {
    const c = target.charCodeAt(i)
    if (c === 63 /* ? */ || c === 35 /* # */) return i === start ? '/' : target.slice(start, i)
  }
  return start === target.length ? '/' : target.slice(start)
}

/**
 * The path of a serialised URL (`Request.url` always is one): what `new URL(url).pathname`
 * gives, without parsing the whole URL, for `http:` and `https:`; `URL` for anything else.
 */
export function urlPath(url: string): string {
  return /^https?:\/\/[^/]*(\/[^?#]*)/.exec(url)?.[1] ?? new URL(url).pathname
}
