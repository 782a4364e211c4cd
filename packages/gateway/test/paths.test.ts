// A limit on a path holds for every spelling of that path: the gateway decides on the canonical
// path, in route form, and forwards exactly the canonical path (ADR 0009). Raw request lines over
// real sockets, since HTTP clients clean up their paths before sending.
import { connect } from 'node:net'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { canonicalPath, canonicalTarget, hostForm, routeForm } from '../src/policy/path.js'
import { type InProcess, startInProcess } from './support/gateway.js'
import { type Echo, type Origin, startOrigin } from './support/origin.js'

describe('canonicalPath', () => {
  test.each([
    ['/', '/'],
    ['/login', '/login'],
    ['/favicon.ico', '/favicon.ico'],
    ['//login', '/login'],
    ['/api///v1//users/', '/api/v1/users/'],
    ['/./login', '/login'],
    ['/x/../login', '/login'],
    ['/../../login', '/login'],
    ['/a/b/..', '/a/'],
    ['/a/b/.', '/a/b/'],
    ['/a//..', '/a/'],
    ['/a/.../b', '/a/.../b'],
    ['/.well-known/x', '/.well-known/x'],
    ['/%6Cogin', '/login'],
    ['/%4C%4f%47%49%4E', '/LOGIN'],
    ['/x/%2e%2E/login', '/login'],
    ['/a%2fb', '/a%2Fb'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/100%25', '/100%25'],
    ['/%2541', '/%2541'],
    ['/x\\..\\login', '/login'],
    ['/a-b_c~d%7E', '/a-b_c~d~'],
    ['/login;a/..;/x', '/login;a/..;/x'],
  ])('%j → %j', (input, expected) => {
    expect(canonicalPath(input)).toBe(expected)
  })

  test.each(['/%', '/%4', '/%zz', '/a%g0', '/%%34%31'])('a bad escape %j has no canonical form', (input) => {
    expect(canonicalPath(input)).toBeUndefined()
  })

  test('property: the canonical form is its own, with no `//`, `\\`, dot segment, or escaped unreserved or lower-case hex', () => {
    const parts = fc.constantFrom(...'/\\.%aAzZ09-_~;2eEfF5cC'.split(''), '%2e', '%2F', '%41', '..', '//')
    fc.assert(
      fc.property(fc.array(parts, { maxLength: 24 }), (p) => {
        const path = `/${p.join('')}`
        const c = canonicalPath(path)
        if (c === undefined) {
          expect(path).toMatch(/%(?![0-9A-Fa-f]{2})/)
          return
        }
        expect(canonicalPath(c)).toBe(c)
        expect(c).not.toMatch(/\/\/|\\|\/\.\.?(\/|$)/)
        expect(c).not.toMatch(/%(?![0-9A-F]{2})|%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2D|2E|5F|7E)/)
      }),
      { numRuns: 5000 },
    )
  })
})

describe('routeForm', () => {
  test.each([
    ['/login', '/login'],
    ['/Login/', '/login'],
    ['/login;jsessionid=1', '/login'],
    ['/a/..;/login', '/login'],
    ['/a;x/b;y/', '/a/b'],
    ['/caf%C3%A9', '/café'],
  ])('%j → %j', (input, expected) => {
    expect(routeForm(input)).toBe(expected)
  })
})

describe('hostForm', () => {
  test.each([
    ['Example.COM', 'example.com'],
    ['example.com.', 'example.com'],
    ['API.example.com.:8080', 'api.example.com:8080'],
    ['[::1]:8080', '[::1]:8080'],
    ['a..', 'a.'],
    [undefined, ''],
  ])('%j → %j', (input, expected) => {
    expect(hostForm(input)).toBe(expected)
  })
})

describe('canonicalTarget', () => {
  test.each([
    ['/x/../login?next=/a/../b', 'h', { target: '/login?next=/a/../b' }],
    ['/login#frag', 'h', { target: '/login' }],
    ['/login?q#frag', 'h', { target: '/login?q' }],
    ['http://h/x/../login?q', 'h', { target: '/login?q' }],
    ['HTTP://H:8080', 'h:8080', { target: '/' }],
    ['http://h?q', 'h', { target: '/?q' }],
  ])('%j (Host %j) → %j', (raw, host, expected) => {
    expect(canonicalTarget(raw, host)).toEqual(expected)
  })

  test('property: any request line target gives a canonical origin-form target or an error, never a throw', () => {
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc
        .array(
          fc.constantFrom('/', '\\', '.', '..', '%', '%2e', '%zz', '?', '#', ';', 'a', 'A', 'http://h', ':'),
          {
            maxLength: 12,
          },
        )
        .map((p) => p.join('')),
    )
    fc.assert(
      fc.property(text, fc.option(fc.constantFrom('h', 'H.', 'h:80', '')), (raw, host) => {
        const answer = canonicalTarget(raw, host ?? undefined)
        if ('error' in answer) {
          expect(answer.error.length).toBeGreaterThan(0)
          return
        }
        const q = answer.target.indexOf('?')
        const path = q === -1 ? answer.target : answer.target.slice(0, q)
        expect(path.startsWith('/')).toBe(true)
        expect(answer.target).not.toContain('#')
        expect(canonicalPath(path)).toBe(path)
        expect(canonicalTarget(answer.target, host ?? undefined)).toEqual(answer)
        expect(routeForm(path).startsWith('/')).toBe(true)
      }),
      { numRuns: 5000 },
    )
  })

  test.each([
    ['http://other/login', 'h', /names the host "other" but the Host header is "h"/],
    ['http://user@h/login', 'h', /names the host "user@h"/],
    ['login', 'h', /neither a path/],
    ['example.com:443', 'h', /neither a path/],
    ['/log%zzin', 'h', /two hex digits/],
    ['*', 'h', /server-wide OPTIONS/],
    // A Host that is no `host[:port]` (RFC 9110 §7.2; what nginx and envoy refuse too): passed on
    // in `X-Forwarded-Host`, `a b` or `h/x` would reach the upstream's links and redirects.
    ['/login', 'a b', /^The Host header is not a host and port: "a b"\.$/],
    ['/login', 'h/evil', /not a host and port: "h\/evil"/],
    ['/login', 'h\\x', /not a host and port: "h\\\\x"/],
    ['/login', 'caf\u00e9.example', /not a host and port: "caf\u00e9\.example"/],
    ['/login', 'h\t', /not a host and port: "h\\t"/],
  ])('%j (Host %j) is refused', (raw, host, message) => {
    const answer = canonicalTarget(raw, host)
    expect('error' in answer && answer.error).toMatch(message)
  })
})

describe('over real HTTP', () => {
  let origin: Origin
  let gw: InProcess
  // On the system clock, a window whose end no test here spans: its counts would start again.
  const WINDOW = farWindow()
  const POLICY = `
rules:
  - { name: login, match: { path: /login, methods: [POST] }, algorithm: fixed-window, limit: 2, window: ${WINDOW} }
  - { name: per-path, match: { path: /files/** }, key: path, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: vhost, match: { host: api.example.test, path: /v }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: api, match: { path: /api/* }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: cafe, match: { path: /café/* }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
`
  beforeAll(async () => {
    origin = await startOrigin()
    gw = await startInProcess(POLICY, { upstream: origin.url })
  })
  afterAll(async () => {
    await gw?.close()
    await origin?.close()
  })

  /** Sends one raw request line (to `gw`, or `to`) and returns the status and body. */
  function raw(
    target: string,
    method = 'GET',
    host?: string,
    to: InProcess = gw,
  ): Promise<{ status: number; body: string }> {
    const port = Number(new URL(to.url).port)
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(
          `${method} ${target} HTTP/1.1\r\nHost: ${host ?? `127.0.0.1:${port}`}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
        ),
      )
      let data = ''
      socket.setEncoding('latin1')
      socket.on('data', (chunk: string) => {
        data += chunk
      })
      socket.on('error', reject)
      socket.on('end', () => {
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1])
        const split = data.indexOf('\r\n\r\n')
        let body = data.slice(split + 4)
        if (/^transfer-encoding: chunked$/im.test(data.slice(0, split))) {
          let plain = ''
          for (let at = 0, size = 1; size > 0; ) {
            const eol = body.indexOf('\r\n', at)
            size = Number.parseInt(body.slice(at, eol), 16)
            plain += body.slice(eol + 2, eol + 2 + size)
            at = eol + 4 + size
          }
          body = plain
        }
        resolve({ status, body })
      })
    })
  }

  test('every spelling of /login counts against the login limit, and the origin gets /login', async () => {
    const port = Number(new URL(gw.url).port)
    const spellings = [
      '/login',
      '//login',
      '/LOGIN',
      '/login/',
      '/%6Cogin',
      '/x/../login',
      '/./login',
      '/x\\..\\login',
      '/login;jsessionid=1',
      '/a/..;/login',
      `http://127.0.0.1:${port}/x/../login`,
    ]
    const answers = []
    for (const target of spellings) answers.push(await raw(target, 'POST'))
    expect(answers.map((a) => a.status)).toEqual([200, 200, ...spellings.slice(2).map(() => 429)])
    const forwarded = answers.slice(0, 2).map((a) => (JSON.parse(a.body) as Echo).url)
    expect(forwarded).toEqual(['/login', '/login'])
  })

  test('the upstream receives the canonical path with the query as sent', async () => {
    const { status, body } = await raw('/a//b/./c/../%64?x=%2e%2e&y=1')
    expect(status).toBe(200)
    expect((JSON.parse(body) as Echo).url).toBe('/a/b/d?x=%2e%2e&y=1')
  })

  test('a path ending in `/*` also holds for `/api/` and `/api//`, whose route form is `/api`', async () => {
    expect((await raw('/api/x')).status).toBe(200)
    // Fastify and Hono route `/api/` and `/api//` to `/api/*`; the route form of both is `/api`.
    for (const target of ['/api/', '/api//', '/API/'])
      expect([target, (await raw(target)).status]).toEqual([target, 429])
    expect((await raw('/api/x/y')).status).toBe(200)
  })

  test('a glob written with non-ASCII text holds for the escaped path in any case', async () => {
    expect((await raw('/caf%C3%A9/1')).status).toBe(200)
    for (const target of ['/CAF%c3%a9/2', '/caf%C3%A9/%FF'])
      expect([target, (await raw(target)).status]).toEqual([target, 429])
    expect((await raw('/cafe/1')).status).toBe(200)
  })

  test('`key: path` keys every spelling of one path alike', async () => {
    expect((await raw('/files/Report.PDF')).status).toBe(200)
    expect((await raw('/files//report.pdf/')).status).toBe(429)
    expect((await raw('/files/%72eport.pdf')).status).toBe(429)
    expect((await raw('/files/other.pdf')).status).toBe(200)
  })

  test('a host rule holds for the Host in any case and with the trailing dot of a fully qualified name', async () => {
    expect((await raw('/v', 'GET', 'api.example.test')).status).toBe(200)
    expect((await raw('/v', 'GET', 'API.Example.TEST.')).status).toBe(429)
    expect((await raw('http://api.example.test./v', 'GET', 'api.example.test')).status).toBe(429)
    expect((await raw('/v', 'GET', 'other.example.test')).status).toBe(200)
  })

  test("dot segments cannot climb out of the upstream URL's path prefix", async () => {
    const based = await startInProcess(`upstream: { url: ${origin.url}/base }\nrules: []\n`)
    try {
      for (const target of ['/../admin', '/x/%2e%2e/%2e%2e/admin', '/..\\admin']) {
        const { status, body } = await raw(target, 'GET', undefined, based)
        expect([target, status, (JSON.parse(body) as Echo).url]).toEqual([target, 200, '/base/admin'])
      }
    } finally {
      await based.close()
    }
  })

  test('a bad escape, a foreign host in an absolute target, or a target that is not a path get a 400 problem', async () => {
    for (const [target, detail] of [
      ['/log%zzin', /two hex digits/],
      ['http://evil.example/login', /names the host "evil.example"/],
      ['*', /^The target `\*` is only for a server-wide OPTIONS, which is not forwarded/],
    ] as const) {
      const { status, body } = await raw(target, 'POST')
      expect(status).toBe(400)
      expect(JSON.parse(body)).toMatchObject({ status: 400, detail: expect.stringMatching(detail) })
    }
  })

  test("what Node's HTTP parser refuses, and a request without Host, get a problem too, then the connection closes", async () => {
    const port = Number(new URL(gw.url).port)
    const send = (data: string) =>
      new Promise<{ head: string; body: string }>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(data))
        let text = ''
        socket.setEncoding('latin1')
        socket.on('data', (chunk: string) => {
          text += chunk
        })
        socket.on('error', reject)
        socket.on('close', () => {
          const split = text.indexOf('\r\n\r\n')
          resolve({ head: text.slice(0, split), body: text.slice(split + 4) })
        })
      })
    for (const [data, status, detail] of [
      ['GET e HTTP/1.1\r\nHost: x\r\n\r\n', 400, /not valid HTTP\/1\.1 \(HPE_INVALID_URL/],
      ['GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n', 400, /HPE_INVALID_HEADER_TOKEN/],
      // Raw UTF-8 in the target (written as UTF-8 here): Node's parser refuses any byte beyond
      // ASCII there, insecureHTTPParser or not, so it cannot be accepted; the problem says why.
      [
        'GET /caf\u00e9 HTTP/1.1\r\nHost: x\r\n\r\n',
        400,
        /HPE_INVALID_URL: Invalid char in url path\): .*percent-encoded, as UTF-8 bytes \(\/caf%C3%A9\)\./,
      ],
      [
        'GET /search?q=\u00e9 HTTP/1.1\r\nHost: x\r\n\r\n',
        400,
        /Invalid char in url query\): .*percent-encoded/,
      ],
      ['GET / HTTP/1.1\r\nConnection: close\r\n\r\n', 400, /no Host header/],
      ['GET / HTTP/1.1\r\nHost: a b\r\n\r\n', 400, /not a host and port: "a b"/],
      [`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, /HPE_HEADER_OVERFLOW/],
    ] as const) {
      const { head, body } = await send(data)
      expect(head, data.slice(0, 40)).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
      expect(head).toMatch(/^content-type: application\/problem\+json$/im)
      expect(head).toMatch(/^connection: close$/im)
      expect(JSON.parse(body)).toMatchObject({ status, detail: expect.stringMatching(detail) })
    }
    // HTTP/1.0 needs no Host.
    expect((await send('GET /x HTTP/1.0\r\n\r\n')).head).toMatch(/^HTTP\/1\.1 200 /)
  })

  test('two Host lines get a 400 problem (RFC 9112 §3.2), whichever one the upstream would have read', async () => {
    const port = Number(new URL(gw.url).port)
    for (const hosts of [
      `127.0.0.1:${port}\r\nHost: evil.example`,
      `evil.example\r\nhost: 127.0.0.1:${port}`,
    ]) {
      const { status, body } = await raw('/login', 'POST', hosts)
      expect(status).toBe(400)
      expect(JSON.parse(body)).toMatchObject({
        status: 400,
        detail: expect.stringMatching(/more than one Host/),
      })
    }
    expect((await raw('/x', 'GET')).status).toBe(200)
  })
})
