import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import type { MatchConfig } from '../config/types.js'
import { compileMatch, wildcard } from './match.js'
import type { RequestInfo } from './request.js'

const request = (host: string, headers: Record<string, string> = {}): RequestInfo => ({
  method: 'GET',
  path: '/',
  routePath: '/',
  query: '',
  host,
  header: (name) => headers[name],
  peer: '127.0.0.1',
})
const match = (m: Partial<MatchConfig>) =>
  compileMatch({ hosts: [], paths: [], methods: [], headers: [], ...m })

/** The matcher globs used to compile to: one `.*` per `*` (kept here as the reference). */
const reference = (glob: string, flags: string) =>
  new RegExp(
    `^${glob
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
    flags,
  )

describe('wildcard', () => {
  test.each([
    ['*.example.com', 'api.example.com', true],
    ['*.example.com', 'a.b.example.com', true],
    ['*.example.com', 'example.com', false],
    ['*.example.com', 'api.example.com.evil', false],
    ['*.*.*.example.com', 'a.b.c.example.com', true],
    ['*.*.*.example.com', 'a.b.example.com', false],
    ['api.example.com', 'api.example.com', true],
    ['api.example.com', 'apixexample.com', false],
    ['t-*', 't-', true],
    ['t-*', 'x-t-1', false],
    ['*', '', true],
    ['a*b*a', 'aba', true],
    ['a*b*a', 'ab', false],
    ['ab*ba', 'aba', false],
    ['a**b', 'ab', true],
    ['a?b', 'axb', false],
    ['a?b', 'a?b', true],
    ['*Mozilla*Chrome*Safari*', 'Mozilla/5.0 Chrome/1 Safari/2', true],
    ['*Mozilla*Chrome*Safari*', 'Mozilla/5.0 Safari/2 Chrome/1', false],
  ])('%s against %j: %s', (glob, text, expected) => {
    expect(wildcard(glob).test(text)).toBe(expected)
  })

  test('ignoreCase folds both sides (host globs); header value globs are case-sensitive', () => {
    expect(wildcard('*.Example.com', true).test('API.EXAMPLE.COM')).toBe(true)
    expect(wildcard('*.Example.com').test('api.example.com')).toBe(false)
  })

  test('`*` does not span a line terminator, as the RegExp `.` did not', () => {
    expect(wildcard('a*b').test('a\nb')).toBe(false)
    expect(wildcard('a*\n*b').test('a\nb')).toBe(true)
  })

  test('property: matches exactly what the RegExp form of the glob matches (either case mode)', () => {
    const units = [
      'a',
      'b',
      'A',
      '.',
      'ab',
      'ba',
      '\n',
      '\u2028',
      'ß',
      'ſ',
      's',
      'S',
      'µ',
      'μ',
      'K',
      'k',
      'İ',
      'i',
    ]
    const glob = fc.array(fc.constantFrom(...units, '*', '**'), { maxLength: 8 }).map((p) => p.join(''))
    const text = fc.array(fc.constantFrom(...units), { maxLength: 12 }).map((p) => p.join(''))
    fc.assert(
      fc.property(glob, text, fc.boolean(), (g, t, ignoreCase) => {
        expect(wildcard(g, ignoreCase).test(t)).toBe(reference(g, ignoreCase ? 'i' : '').test(t))
      }),
      { numRuns: 20_000 },
    )
  })
})

describe('compileMatch', () => {
  test('hosts: port stripped unless the glob names one; headers: present, absent, glob', () => {
    const byHost = match({ hosts: ['*.example.test'] })
    expect(byHost(request('api.example.test:8080'))).toBe('*')
    expect(byHost(request('example.org'))).toBeUndefined()
    expect(match({ hosts: ['api.example.test:8080'] })(request('api.example.test:8080'))).toBe('*')
    expect(match({ hosts: ['api.example.test:8080'] })(request('api.example.test:9090'))).toBeUndefined()
    const byHeader = match({
      headers: [
        ['x-tenant', 't-*'],
        ['x-skip', false],
      ],
    })
    expect(byHeader(request('a', { 'x-tenant': 't-1' }))).toBe('*')
    expect(byHeader(request('a', { 'x-tenant': 'T-1' }))).toBeUndefined()
    expect(byHeader(request('a', { 'x-tenant': 't-1', 'x-skip': '1' }))).toBeUndefined()
    expect(byHeader(request('a'))).toBeUndefined()
  })

  // Linear time whatever the glob and the client's text. This test asserts no timing; it simply
  // finishes: against the old one-`.*`-per-`*` RegExps these inputs took minutes (a 3.2 KB Host
  // against `*.*.*.example.com` already blocked the event loop for about 4 s).
  test('a hostile 16 KB Host or header value is decided', () => {
    const host = `${'a.'.repeat(8192)}x`
    expect(match({ hosts: ['*.*.*.example.com'] })(request(host))).toBeUndefined()
    expect(match({ hosts: ['*.*.*.example.com'] })(request(`${host}.example.com`))).toBe('*')
    const ua = 'MozillaChrome'.repeat(1260)
    const byUa = match({ headers: [['user-agent', '*Mozilla*Chrome*Safari*']] })
    expect(byUa(request('a', { 'user-agent': ua }))).toBeUndefined()
    expect(byUa(request('a', { 'user-agent': `${ua}Safari` }))).toBe('*')
  })
})
