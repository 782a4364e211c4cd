import type { MatchConfig } from '../config/types.js'
import { pathGlob } from '../library.js'
import type { RequestInfo } from './request.js'

/** Decides whether a request is a rule's; returns the path pattern it matched (the `route`), or `undefined`. */
export type Matcher = (request: RequestInfo) => string | undefined

const ANY_ROUTE = '*'

// What RegExp `.` never matched, so neither does `*` (Node rejects them in header lines anyway).
const LINE_TERMINATOR = /[\n\r\u2028\u2029]/
const NON_ASCII = /[^\x00-\x7f]/

/** Case folding as RegExp's `i` flag (without `u`) does it: each UTF-16 unit upper-cased alone. */
function foldCase(text: string): string {
  if (!NON_ASCII.test(text)) return text.toUpperCase()
  let folded = ''
  for (let i = 0; i < text.length; i++) {
    const unit = text.charAt(i)
    const upper = unit.toUpperCase()
    // Kept when upper-casing would change its length or take it into ASCII (`ß`, `ſ`).
    folded += upper.length !== 1 || (unit >= '\x80' && upper < '\x80') ? unit : upper
  }
  return folded
}

/**
 * A host or header value glob: `*` is any run of characters (`*.example.com` matches every
 * subdomain), nothing else is special. Read in linear time whatever the glob: the text must start
 * with the part before the first `*` and end with the part after the last; the parts between are
 * found left to right, each at its first place (the earliest leaves the most room to the rest). A
 * RegExp of several `.*` backtracks for seconds on a hostile 3 KB Host.
 *
 * @example wildcard('*.example.com', true).test('API.example.com') // true
 */
export function wildcard(glob: string, ignoreCase = false): { test(text: string): boolean } {
  const fold = ignoreCase ? foldCase : (text: string) => text
  const parts = fold(glob).split('*')
  const first = parts[0] as string
  const last = parts[parts.length - 1] as string
  const middle = parts.slice(1, -1).filter((part) => part !== '')
  if (parts.length === 1) return { test: (text) => fold(text) === first }
  return {
    test(input) {
      const text = fold(input)
      const end = text.length - last.length
      if (end < first.length || !text.startsWith(first) || !text.endsWith(last)) return false
      let at = first.length
      for (const part of middle) {
        const found = text.indexOf(part, at)
        if (found === -1 || found + part.length > end || LINE_TERMINATOR.test(text.slice(at, found)))
          return false
        at = found + part.length
      }
      return !LINE_TERMINATOR.test(text.slice(at, end))
    },
  }
}

/**
 * Compiles a rule's `match`: every condition given must hold (host, path, methods, headers); a
 * list within one condition matches any of its entries. `GET` in `methods` matches `HEAD` too.
 *
 * @example compileMatch({ hosts: [], paths: ['/api/**'], methods: ['GET'], headers: [] })
 */
export function compileMatch(match: MatchConfig): Matcher {
  const paths = match.paths.map((p) => ({ pattern: p, regexp: pathGlob(p) }))
  // `GET` covers `HEAD` too: Express, Fastify, Hono and most servers answer HEAD with the GET
  // handler, so a GET limit that let HEAD through would let it run uncharged (as the library's).
  const methods =
    match.methods.length === 0
      ? undefined
      : new Set(match.methods.includes('GET') ? [...match.methods, 'HEAD'] : match.methods)
  const hosts = match.hosts.map((h) => ({ withPort: h.includes(':'), glob: wildcard(h, true) }))
  const headers = match.headers.map(([name, expected]) => ({
    name,
    test: typeof expected === 'boolean' ? undefined : wildcard(expected),
    present: expected !== false,
  }))
  return (request) => {
    if (methods !== undefined && !methods.has(request.method)) return undefined
    let route = ANY_ROUTE
    if (paths.length > 0) {
      const path = request.routePath
      const hit = paths.find((p) => p.regexp.test(path))
      if (hit === undefined) return undefined
      route = hit.pattern
    }
    if (hosts.length > 0) {
      const full = request.host
      const colon = full.lastIndexOf(':')
      const name = colon > full.lastIndexOf(']') ? full.slice(0, colon) : full
      if (!hosts.some((h) => h.glob.test(h.withPort ? full : name))) return undefined
    }
    for (const h of headers) {
      const value = request.header(h.name)
      if (value === undefined ? h.present : !h.present) return undefined
      if (h.test !== undefined && !h.test.test(value as string)) return undefined
    }
    return route
  }
}
