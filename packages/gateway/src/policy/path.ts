/**
 * The request target the gateway decides on is the one it forwards. A proxy that matched
 * `/x/../login` as `/x/../login` and forwarded it unchanged would let the upstream route it to
 * `/login` past the login limit; so the gateway makes the path canonical, matches rules on it
 * (in the library's `routePath` form) and forwards exactly that path. See
 * docs/decisions/0009-canonical-paths.md.
 */

import { routePath } from '../library.js'

const HEX = '0123456789ABCDEF'

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  const l = c | 0x20
  return l >= 97 && l <= 102 ? l - 87 : -1
}

/** RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". */
function unreserved(c: number): boolean {
  const l = c | 0x20
  return (l >= 97 && l <= 122) || (c >= 48 && c <= 57) || c === 45 || c === 46 || c === 95 || c === 126
}

/** Whether `path` may need work: an escape, a backslash, `//`, or a segment starting with `.`. */
function plain(path: string): boolean {
  let previous = 0
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (c === 37 /* % */ || c === 92 /* \ */) return false
    if (previous === 47 /* / */ && (c === 47 || c === 46) /* . */) return false
    previous = c
  }
  return true
}

/** Decodes escaped unreserved characters and upper-cases the hex of the rest; `undefined` for a bad escape. */
function decodeUnreserved(path: string): string | undefined {
  let out = ''
  let from = 0
  for (let i = path.indexOf('%'); i !== -1; i = path.indexOf('%', i)) {
    const hi = hexValue(path.charCodeAt(i + 1))
    const lo = hexValue(path.charCodeAt(i + 2))
    if (hi < 0 || lo < 0) return undefined
    const code = hi * 16 + lo
    out += path.slice(from, i) + (unreserved(code) ? String.fromCharCode(code) : `%${HEX[hi]}${HEX[lo]}`)
    i += 3
    from = i
  }
  return from === 0 ? path : out + path.slice(from)
}

/**
 * `.` and `..` segments resolved as the WHATWG URL standard does (`..` never climbs above the
 * root; an empty segment counts, so `/a//..` is `/a/`), then runs of `/` merged.
 */
function resolveSegments(path: string): string {
  const parts = path.split('/')
  const out: string[] = []
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i] as string
    if (p === '.' || p === '..') {
      if (p === '..') out.pop()
      if (i === parts.length - 1) out.push('')
    } else out.push(p)
  }
  return `/${out.join('/')}`.replace(/\/{2,}/g, '/')
}

/**
 * The canonical form of a URL path (no query), the same resource for any server: `\` read as `/`
 * (as WHATWG URL parsing, and so every `fetch`-based server, reads it), escaped unreserved
 * characters decoded (`%6C` → `l`, `%2e` → `.`) and other escapes in upper-case hex (`%2f` →
 * `%2F`, still escaped), dot segments resolved, runs of `/` merged. `undefined` for a `%` not
 * followed by two hex digits, which servers disagree on. The result is its own canonical form.
 *
 * @example canonicalPath('/api//v1/..\\%6Cogin') // '/api/login'
 */
export function canonicalPath(path: string): string | undefined {
  if (plain(path)) return path
  const decoded = decodeUnreserved(path.replace(/\\/g, '/'))
  return decoded === undefined ? undefined : resolveSegments(decoded)
}

/**
 * The characters of an authority (RFC 3986 §3.2, as nghttp2 checks it for envoy): a Host with a
 * space, `/`, `\`, a control or a non-ASCII character is no host, and would reach the upstream
 * in `X-Forwarded-Host` (its links and redirects) as it came.
 */
const AUTHORITY = /^[\w\-.~%!$&'()*+,;=:@[\]]*$/

/** A request target the gateway forwards, or why it refuses it (a 400). */
export type Target = { readonly target: string } | { readonly error: string }

/**
 * The canonical origin-form target (`/path?query`) of a request line's target, given the Host
 * header:
 * - origin form (`/a/../b?q`): the path made canonical, the query kept as sent;
 * - absolute form (`http://host/a?q`): the same, when its authority is the Host header (RFC 9112
 *   §3.2.2 has the authority win; two hosts in one request are refused instead).
 * A fragment (`#…`, never sent by clients) is dropped. Anything else (`OPTIONS *` included, as
 * nginx refuses it), a path with a bad escape, or a Host that is no authority, is refused.
 *
 * @example canonicalTarget('//login?next=/', 'example.com') // { target: '/login?next=/' }
 */
export function canonicalTarget(raw: string, host: string | undefined): Target {
  if (host !== undefined && !AUTHORITY.test(host))
    return { error: `The Host header is not a host and port: ${JSON.stringify(host)}.` }
  const hash = raw.indexOf('#')
  let target = hash === -1 ? raw : raw.slice(0, hash)
  if (target === '*')
    return { error: 'The target `*` is only for a server-wide OPTIONS, which is not forwarded: name a path.' }
  const absolute = target.startsWith('/') ? null : /^https?:\/\/([^/?]*)/i.exec(target)
  if (absolute !== null) {
    const authority = hostForm(absolute[1])
    if (authority !== hostForm(host)) {
      return {
        error: `The request target names the host "${authority}" but the Host header is "${host ?? ''}".`,
      }
    }
    target = target.slice(absolute[0].length)
    if (!target.startsWith('/')) target = `/${target}`
  }
  const c = target.charCodeAt(0)
  if (c !== 47 /* / */ && c !== 92 /* \ */) {
    return { error: 'The request target is neither a path (origin form) nor an absolute http(s) URL.' }
  }
  const q = target.indexOf('?')
  const path = canonicalPath(q === -1 ? target : target.slice(0, q))
  if (path === undefined) {
    return { error: 'The request path has a "%" that is not followed by two hex digits.' }
  }
  return { target: q === -1 ? path : path + target.slice(q) }
}

/**
 * The form the gateway's rules match a canonical path in (`match.path`, `key: path`): the
 * library's `routePath`, after `;` parameters are dropped from every segment, since Java servlet
 * containers read `/a/..;/login` as `/login` and `/login;jsessionid=1` as `/login`.
 *
 * @example routeForm('/Admin/..;/Login/') // '/login'
 */
export function routeForm(path: string): string {
  return routePath(path.includes(';') ? path.replace(/;[^/]*/g, '') : path)
}

/**
 * A Host header as rules match and key it: lower case, without the trailing dot of a fully
 * qualified name (`API.example.com.:8080` is `api.example.com:8080`), which nginx and DNS ignore.
 *
 * @example hostForm('Example.COM.') // 'example.com'
 */
export function hostForm(host: string | undefined): string {
  if (host === undefined) return ''
  const lower = host.toLowerCase()
  return lower.includes('.:') || lower.endsWith('.') ? lower.replace(/\.(?=:\d*$|$)/, '') : lower
}
