import type { MatchConfig } from '../config/types.js'
import { pathGlob } from '../library.js'
import type { RequestInfo } from './request.js'

/** Decides whether a request is a rule's; returns the path pattern it matched (the `route`), or `undefined`. */
export type Matcher = (request: RequestInfo) => string | undefined

const ANY_ROUTE = '*'

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\]/g, '\\$&')
}

/** `*` is any run of characters (`*.example.com` matches every subdomain). */
function wildcard(glob: string, flags = ''): RegExp {
  return new RegExp(`^${glob.split('*').map(escapeRegExp).join('.*')}$`, flags)
}

/**
 * Compiles a rule's `match`: every condition given must hold (host, path, methods, headers); a
 * list within one condition matches any of its entries.
 *
 * @example compileMatch({ hosts: [], paths: ['/api/**'], methods: ['GET'], headers: [] })
 */
export function compileMatch(match: MatchConfig): Matcher {
  const paths = match.paths.map((p) => ({ pattern: p, regexp: pathGlob(p) }))
  const methods = match.methods.length === 0 ? undefined : new Set(match.methods)
  const hosts = match.hosts.map((h) => ({ withPort: h.includes(':'), regexp: wildcard(h, 'i') }))
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
      if (!hosts.some((h) => h.regexp.test(h.withPort ? full : name))) return undefined
    }
    for (const h of headers) {
      const value = request.header(h.name)
      if (value === undefined ? h.present : !h.present) return undefined
      if (h.test !== undefined && !h.test.test(value as string)) return undefined
    }
    return route
  }
}
