import { describe } from '../library.js'
import type { Checker } from './checker.js'
import type { Path } from './issues.js'

/** An HTTP token (RFC 9110): what a header name or a method may be. */
export const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/**
 * Why a request can never have the header `name` (a valid token), or `undefined` when it can. Node
 * parses `__proto__` (in any case) but never sets it in `req.headers`: a key on it always falls
 * back, a condition on it never holds.
 *
 * @example unseenHeader('__PROTO__') // 'expected a header name a request can have; Node never …'
 */
export function unseenHeader(name: string): string | undefined {
  if (name.toLowerCase() !== '__proto__') return undefined
  return 'expected a header name a request can have; Node never passes a "__proto__" header on: a request never has it'
}

/** Validates a header name (a token a request can have), lowercased. */
export function readHeaderName(c: Checker, path: Path, value: unknown): string | undefined {
  if (typeof value !== 'string' || !TOKEN.test(value))
    c.add(path, 'ERR_HEADER', `expected a header name like "x-api-key", got ${describe(value)}`)
  else if (unseenHeader(value) !== undefined) c.add(path, 'ERR_HEADER', unseenHeader(value) as string)
  else return value.toLowerCase()
  return undefined
}
