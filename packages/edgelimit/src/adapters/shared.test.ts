import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { fieldValues, lowerName, pathOf, repeatsName, urlPath } from './shared.js'

describe('urlPath', () => {
  it('is new URL(url).pathname for every serialised URL (property)', () => {
    fc.assert(
      fc.property(
        fc.webUrl({ withQueryParameters: true, withFragments: true, validSchemes: ['http', 'https'] }),
        fc.string(),
        (raw, tail) => {
          // Serialised as Request.url is; the tail adds odd paths (`..`, `\\`, `%`, `?` in odd places).
          for (const href of [raw, tail, `/${tail}`].flatMap((u) =>
            URL.canParse(u, raw) ? [new URL(u, raw).href] : [],
          )) {
            const url = new URL(href)
            expect(urlPath(href)).toBe(url.pathname)
            // A Request refuses URLs with credentials (fast-check finds `http://%20@&/`).
            if (url.username === '' && url.password === '')
              expect(urlPath(new Request(href).url)).toBe(url.pathname)
          }
        },
      ),
      { numRuns: 500 },
    )
  })

  it('falls back to URL for other schemes', () => {
    for (const href of [
      'file:///a/b?c',
      'ws://h/p#f',
      'data:text/plain,hi?x',
      'http://[::1]:8080/x?y',
      'https://u:p@h/',
    ]) {
      expect(urlPath(href)).toBe(new URL(href).pathname)
    }
  })
})

describe('pathOf', () => {
  it('cuts the query and the fragment from a request target', () => {
    expect(['/a/b?x=1', '/a#f', '/?', '', '/plain', '*'].map((t) => pathOf(t))).toEqual([
      '/a/b',
      '/a',
      '/',
      '/',
      '/plain',
      '*',
    ])
    expect(pathOf(undefined)).toBe('/')
  })

  it('reads the path of an absolute-form target, as Express and WHATWG URL parsing route it', () => {
    for (const [target, path] of [
      ['http://example.com/login?next=/', '/login'],
      ['HTTPS://example.com:8443/a/b#f', '/a/b'],
      ['http://example.com', '/'],
      ['http://example.com?x=1', '/'],
      ['http://user@example.com/x', '/x'],
    ] as const) {
      expect([target, pathOf(target)]).toEqual([target, path])
      expect(pathOf(target)).toBe(new URL(target).pathname)
    }
  })
})

describe('lowerName', () => {
  it('is name.toLowerCase(), cached or not (property)', () => {
    for (const name of [
      'RateLimit',
      'RateLimit-Policy',
      'X-RateLimit-Reset',
      'retry-after',
      '__proto__',
      '123',
    ])
      expect([lowerName(name), lowerName(name)]).toEqual([name.toLowerCase(), name.toLowerCase()])
    // Well past the cache's 64 entries: the uncached path answers the same.
    fc.assert(
      fc.property(fc.string(), (name) => {
        expect(lowerName(name)).toBe(name.toLowerCase())
        expect(lowerName(name)).toBe(name.toLowerCase())
      }),
      { numRuns: 300 },
    )
  })
})

describe('repeatsName', () => {
  it('is whether fieldValues groups two fields under one name (property)', () => {
    const name = fc.constantFrom(
      'set-cookie',
      'Set-Cookie',
      'SET-COOKIE',
      'vary',
      'ratelimit',
      'x-ratelimit-limit',
      'x-ratelimit-reset',
      'a',
      'A',
      'b',
    )
    fc.assert(
      fc.property(fc.array(fc.tuple(name, fc.string()), { maxLength: 8 }), (fields) => {
        expect(repeatsName(fields)).toBe(fieldValues(fields).size < fields.length)
      }),
      { numRuns: 2_000 },
    )
    expect(
      repeatsName([
        ['ratelimit-policy', 'p'],
        ['ratelimit', 'r'],
        ['retry-after', '1'],
        ['content-type', 'c'],
        ['cache-control', 'n'],
      ]),
    ).toBe(false)
  })
})
