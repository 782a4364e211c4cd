import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { URL as WhatwgURL } from 'whatwg-url'
import { pathGlob, routePath } from './path.js'

describe('routePath', () => {
  test.each([
    ['/', '/'],
    ['/login', '/login'],
    ['/favicon.ico', '/favicon.ico'],
    ['/.well-known/x', '/.well-known/x'],
    ['/a/.../b', '/a/.../b'],
    ['//login', '/login'],
    ['/api///v1//users/', '/api/v1/users'],
    ['/LOGIN', '/login'],
    ['/login/', '/login'],
    ['/./login', '/login'],
    ['/x/../login', '/login'],
    ['/../../login', '/login'],
    ['/a/b/..', '/a'],
    ['/a/..', '/'],
    ['/%6Cogin', '/login'],
    ['/%4C%4f%47%49%4E', '/login'],
    ['/x/%2e%2E/login', '/login'],
    ['/x\\..\\login', '/login'],
    ['\\\\login', '/login'],
    // `;` is not special to JavaScript servers (the gateway folds it for Java upstreams).
    ['/login;a', '/login;a'],
    ['/a/..;/b', '/a/..;/b'],
    ['/a//..', '/a'],
    ['/%/../caf%C3%A9', '/café'],
    ['/%ff/%2e%2e/login', '/login'],
    // One decodeURI pass, as Hono routes: `/`, `;` and the like stay escaped (in lower case).
    ['/a%2Fb', '/a%2fb'],
    ['/a%3Bb', '/a%3bb'],
    ['/100%25', '/100%'],
    ['/%2541', '/%41'],
    ['/caf%C3%A9', '/café'],
    // A bad escape is folded without decoding.
    ['/Log%zzIn/', '/log%zzin'],
    // Each run of escapes is decoded on its own, as Hono decodes them: an invalid run (not UTF-8)
    // stays escaped, and leaves the others decoded.
    ['/caf%C3%A9/%FF', '/café/%ff'],
    ['/%C0%AE/caf%C3%A9', '/%c0%ae/café'],
    ['/caf%C3%A9%FF', '/caf%c3%a9%ff'],
  ])('%j → %j', (input, expected) => {
    expect(routePath(input)).toBe(expected)
  })

  test('a path already in route form is returned as the same string (no work on the common case)', () => {
    const path = '/api/v1/users/12345'
    expect(routePath(path)).toBe(path)
  })

  const parts = fc.constantFrom(
    ...'/\\.%aAzZ09-_~;=2eEfF5cC'.split(''),
    '%2e',
    '%2F',
    '%41',
    '%C3%A9',
    '..',
    '//',
  )
  const paths = fc.array(parts, { maxLength: 24 }).map((p) => `/${p.join('')}`)

  /** Whether decodeURI reads `path` in one pass with nothing left to decode (no bad or double escape). */
  const decodable = (path: string) => !/%(?![\dA-Fa-f]{2})|%25/.test(path)

  test('property: no `//`, `\\`, dot segment, upper case or trailing `/`; its own route form when it decodes', () => {
    fc.assert(
      fc.property(paths, (path) => {
        const r = routePath(path)
        expect(r.startsWith('/')).toBe(true)
        expect(r).not.toMatch(/\/\/|\\|\/\.\.?(\/|$)|[A-Z]|.\/$/)
        if (decodable(path)) expect(routePath(r)).toBe(r)
      }),
      { numRuns: 5000 },
    )
  })

  // whatwg-url is the URL standard's reference implementation (what fetch-based servers route
  // on). Node 20's own URL (ada 2.9) leaves `/a/.a/..` as it is, where the standard gives `/a/`.
  test('property: parsing the path as a URL first changes nothing (dot segments, `\\`, `%2e`)', () => {
    fc.assert(
      fc.property(paths, (path) => {
        if (/^[/\\]{2}/.test(path) || !decodable(path)) return // a URL reads `//x` as a host
        expect(routePath(new WhatwgURL(path, 'http://h').pathname)).toBe(routePath(path))
      }),
      { numRuns: 5000 },
    )
  })
})

describe('pathGlob', () => {
  const matches = (glob: string, path: string) => pathGlob(glob).test(routePath(path))

  test('every spelling a server reads as /login matches /login', () => {
    for (const path of [
      '/login',
      '//login',
      '/LOGIN',
      '/login/',
      '/%6Cogin',
      '/x/../login',
      '/x\\..\\login',
      '/%ff/%2e%2e/login',
    ])
      expect([path, matches('/login', path)]).toEqual([path, true])
    for (const path of ['/logins', '/login/x', '/log%2Fin', '/a/login', '/log%zzin'])
      expect([path, matches('/login', path)]).toEqual([path, false])
  })

  test('an invalid escape elsewhere in the path does not take a non-ASCII route out of its limit', () => {
    // Hono routes each of these to `/café/:id` (it decodes each run of escapes on its own).
    for (const path of ['/caf%C3%A9/%FF', '/caf%C3%A9/x%C0%AE', '/CAF%C3%A9/%e2%82/'])
      expect([path, matches('/café/*', path)]).toEqual([path, true])
  })

  test('`*` is one segment, `**` any depth, a final `/**` also the path without it', () => {
    expect(matches('/api/*', '/api/users')).toBe(true)
    expect(matches('/api/*', '/api/users/1')).toBe(false)
    expect(matches('/api/**', '/api/users/1')).toBe(true)
    expect(matches('/api/**', '/api')).toBe(true)
    expect(matches('/api/**', '/API/')).toBe(true)
    expect(matches('/api/**', '/apis')).toBe(false)
    expect(matches('/files/**/raw', '/files/a/b/raw')).toBe(true)
    expect(matches('/**', '/')).toBe(true)
    expect(matches('**', '/any/thing')).toBe(true)
  })

  test('a `**` segment is zero or more segments anywhere, as a globstar is in gitignore and minimatch', () => {
    // `/files/**/raw` is `/files/raw` too, as `/api/**` is `/api`: in a RegExp and in the one-pass run.
    for (const [glob, compiled] of [
      ['/files/**/raw', true],
      ['/files/**/raw/*', false],
    ] as const) {
      expect([glob, pathGlob(glob) instanceof RegExp]).toEqual([glob, compiled])
      for (const path of ['/files/raw', '/files/a/raw', '/files/a/b/raw', '/FILES//raw/'])
        expect([glob, path, matches(glob, path)]).toEqual([glob, path, true])
      for (const path of ['/filesraw', '/files/xraw', '/files/rawx', '/filesx/raw', '/x/files/raw'])
        expect([glob, path, matches(glob, path)]).toEqual([glob, path, false])
    }
    expect(matches('/**/edit', '/edit')).toBe(true)
    expect(matches('/**/edit', '/a/b/edit')).toBe(true)
    expect(matches('/**/edit', '/xedit')).toBe(false)
    expect(matches('/a/**/b/**/c', '/a/b/c')).toBe(true)
    expect(matches('/a/**/b/**/c', '/a/x/b/y/z/c')).toBe(true)
    expect(matches('/a/**/b/**/c', '/a/c')).toBe(false)
    expect(matches('/a/**/**/b', '/a/b')).toBe(true)
    expect(matches('/**/*.json', '/x.json')).toBe(true)
    expect(matches('/**/x/*', '/x/b')).toBe(true)
    expect(matches('/**/x/*', '/x')).toBe(true)
    // A `**` that is not a whole segment is still any run of characters, `/` included.
    expect(matches('/a**b', '/ab')).toBe(true)
    expect(matches('/a**b', '/a/x/b')).toBe(true)
    expect(matches('/a/**b', '/a/b')).toBe(true)
    expect(matches('/a/**b', '/ab')).toBe(false)
  })

  test('a final `/*` also matches the path with that segment empty, which route form drops', () => {
    // Fastify and Hono route `/api/` and `/api//` to `/api/*` (Hono `/api` too), Express 5 to
    // `/api/{*splat}`; the route form of all three is `/api`.
    for (const path of ['/api/', '/api//', '/API/', '/api', '/api/x', '/api/x/'])
      expect([path, matches('/api/*', path)]).toEqual([path, true])
    for (const path of ['/api/x/y', '/apix', '/ap', '/'])
      expect([path, matches('/api/*', path)]).toEqual([path, false])
    expect(matches('/a/*/*', '/a/x/')).toBe(true)
    expect(matches('/*', '/')).toBe(true)
    // The same when the glob's stars compete (no RegExp).
    expect(pathGlob('/**/x/*')).not.toBeInstanceOf(RegExp)
    expect(matches('/**/x/*', '/a/x/')).toBe(true)
    expect(matches('/**/x/*', '/a/x/b')).toBe(true)
    expect(matches('/**/x/*', '/a/x/b/c')).toBe(false)
  })

  test('a glob is put in route form itself: case, trailing slash, spelling, escapes', () => {
    expect(matches('/Login/', '/login')).toBe(true)
    expect(matches('//a/./b', '/a/b')).toBe(true)
    expect(matches('/café', '/caf%C3%A9')).toBe(true)
    expect(matches('/caf%C3%A9', '/café')).toBe(true)
    expect(matches('/a.b', '/axb')).toBe(false)
    expect(matches('/a+b(c)', '/a+b(c)')).toBe(true)
  })
})

describe('pathGlob against hostile paths', () => {
  const matches = (glob: string, path: string) => pathGlob(glob).test(routePath(path))
  // The RegExp pathGlob compiled before: the reference for what a glob matches. `**` was `.*`,
  // which left out line terminators (`/api/%0A` escaped `/api/**`); `[^]` includes them. A final
  // `/*` is optional, as a `/**` segment is (zero segments, in the middle too): route form drops
  // the empty segment of `/api/`.
  const reference = (glob: string) =>
    new RegExp(
      `^${routePath(glob)
        .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
        .replace(/\/\*\*(?=\/|$)|\/\*$|\*\*?/g, (star) =>
          star === '*' ? '[^/]*' : star === '**' ? '[^]*' : star === '/*' ? '(/[^/]*)?' : '(/[^]*)?',
        )}$`,
    )

  test('property: matches exactly what the RegExp form of the glob matches', () => {
    const glob = fc
      .array(fc.constantFrom('/', 'a', 'b', '.', '*', '**', '/**', '/*/', '\n', '%41'), { maxLength: 10 })
      .map((p) => p.join(''))
    const path = fc
      .array(fc.constantFrom('/', 'a', 'b', '.', '\n', 'ab'), { maxLength: 12 })
      .map((p) => p.join(''))
    fc.assert(
      fc.property(glob, path, (g, p) => {
        expect(pathGlob(g).test(p)).toBe(reference(g).test(p))
        expect(pathGlob(g).test(routePath(p))).toBe(reference(g).test(routePath(p)))
      }),
      { numRuns: 20_000 },
    )
  })

  // The meaning of a glob, segment by segment, for globs whose `**` are whole segments: `**` is
  // zero or more segments, a `*` in a segment any run of its characters, a final `*` segment one
  // segment or none (route form drops the empty one of `/api/`). The root `/` is one empty segment.
  const segmentwise = (glob: string, path: string): boolean => {
    const split = (p: string) => p.slice(1).split('/')
    const segment = (g: string, s: string): boolean =>
      g === ''
        ? s === ''
        : g[0] === '*'
          ? segment(g.slice(1), s) || (s !== '' && segment(g, s.slice(1)))
          : g[0] === s[0] && segment(g.slice(1), s.slice(1))
    const run = (gs: string[], ps: string[]): boolean => {
      const [g, ...rest] = gs
      if (g === undefined) return ps.length === 0
      if (g === '**') return run(rest, ps) || (ps.length > 0 && run(gs, ps.slice(1)))
      if (g === '*' && rest.length === 0 && ps.length === 0) return true
      return ps.length > 0 && segment(g, ps[0] as string) && run(rest, ps.slice(1))
    }
    return run(split(glob), split(path))
  }

  test('property: a glob of whole-segment `**` matches what it means segment by segment', () => {
    const segments = fc.constantFrom('**', '*', 'a', 'b', 'ab', 'a*', '*b', 'a*b', '.x', '%41', '\n')
    const glob = fc.array(segments, { minLength: 1, maxLength: 6 }).map((p) => `/${p.join('/')}`)
    const path = fc
      .array(fc.constantFrom('a', 'b', 'ab', 'ba', 'aab', '.x', 'x', '\n'), { maxLength: 7 })
      .map((p) => routePath(`/${p.join('/')}`))
    fc.assert(
      fc.property(glob, path, (g, p) => {
        const route = routePath(g)
        expect(/[^/]\*\*|\*\*[^/]/.test(route)).toBe(false)
        expect([g, p, pathGlob(g).test(p)]).toEqual([g, p, segmentwise(route, p)])
      }),
      { numRuns: 20_000 },
    )
  })

  test('a line terminator in a path does not escape `**`', () => {
    for (const path of ['/api/%0A', '/api/x%0d/y', '/api/%E2%80%A8'])
      expect(matches('/api/**', path)).toBe(true)
  })

  test('globs whose stars cannot compete stay RegExps, and a hostile 16 KB path does not make them backtrack', () => {
    const hostile = `/api${'/users/posts'.repeat(1400)}/x${'a'.repeat(2000)}`
    for (const glob of ['/api/**', '/**/edit', '/files/**/raw', '/users/*/posts/*', '/*/**/x', '/a*b/*/**']) {
      const pattern = pathGlob(glob)
      expect(pattern).toBeInstanceOf(RegExp)
      const started = performance.now()
      for (let i = 0; i < 10; i++) pattern.test(hostile)
      // Linear: well under a millisecond a test here; the old RegExp of several `.*` took seconds.
      expect([glob, performance.now() - started < 1000]).toEqual([glob, true])
    }
    for (const glob of ['/api/**/users/**/edit', '/*a*b', '/**/x/*', '/**/*.json', '/a***']) {
      expect(pathGlob(glob)).not.toBeInstanceOf(RegExp)
    }
  })

  test('a 16 KB path against a glob of several `**` is read once: no backtracking', () => {
    const hostile = `/api${'/users/posts'.repeat(1400)}/x`
    expect(hostile.length).toBeGreaterThan(16 * 1024)
    let reads = 0
    // The path as a String object that counts the characters read by index.
    const counted = new Proxy(new String(hostile), {
      get(target, key) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++
        const value = Reflect.get(target, key)
        return typeof value === 'function' ? value.bind(target) : value
      },
    }) as unknown as string
    for (const glob of ['/api/**/users/**/posts/**/edit', '/**/a/**/b/**/c', '/*/**/*s/**/*s*/**/*e*t']) {
      reads = 0
      expect(pathGlob(glob).test(counted)).toBe(false)
      // Each character once, and the end (`path[length]`) once.
      expect([glob, reads]).toEqual([glob, hostile.length + 1])
    }
  })
})
