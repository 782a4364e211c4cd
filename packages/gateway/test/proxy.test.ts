// Proxying correctness over real HTTP on loopback: methods, bodies, streaming both ways,
// headers, upstream failures.
import { createHash, randomBytes } from 'node:crypto'
import {
  Agent,
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
} from 'node:http'
import { connect, createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { sendProblem } from '../src/proxy/problem.js'
import { type InProcess, rawRequest, socketReader, startInProcess } from './support/gateway.js'
import type { Echo } from './support/origin.js'
import { arrival, type Origin, startOrigin } from './support/origin.js'

let origin: Origin
let gw: InProcess

beforeAll(async () => {
  origin = await startOrigin()
  gw = await startInProcess(
    `
rules:
  - name: everything
    algorithm: gcra
    limit: 100000
    period: 1s
`,
    { upstream: origin.url },
  )
})
afterAll(async () => {
  await gw?.close()
  await origin?.close()
})

const echo = async (response: Response) => (await response.json()) as Echo

describe('methods and bodies', () => {
  test.each(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])(
    '%s reaches the origin as sent',
    async (method) => {
      const body = method === 'GET' || method === 'OPTIONS' ? undefined : `payload for ${method}`
      const response = await fetch(`${gw.url}/echo/${method.toLowerCase()}?a=1&b=two`, { method, body })
      expect(response.status).toBe(200)
      const seen = await echo(response)
      expect(seen.method).toBe(method)
      expect(seen.url).toBe(`/echo/${method.toLowerCase()}?a=1&b=two`)
      expect(seen.bytes).toBe(body === undefined ? 0 : Buffer.byteLength(body))
    },
  )

  test('HEAD gets the headers and no body', async () => {
    const response = await rawRequest(`${gw.url}/echo`, { method: 'HEAD' })
    expect(response.status).toBe(200)
    expect(response.headers['x-origin']).toBe('test')
    expect(response.body.length).toBe(0)
  })

  test('a 2 MB request body arrives intact, and a 3 MB response body comes back intact', async () => {
    const body = randomBytes(2 * 1024 * 1024)
    const seen = await echo(await fetch(`${gw.url}/upload-check`, { method: 'POST', body }))
    expect(seen.bytes).toBe(body.length)
    expect(seen.sha256).toBe(createHash('sha256').update(body).digest('hex'))
    const big = await fetch(`${gw.url}/big?bytes=${3 * 1024 * 1024}`)
    const received = Buffer.from(await big.arrayBuffer())
    expect(received.length).toBe(3 * 1024 * 1024)
    expect(received.subarray(0, 10).toString()).toBe('edgelimit-')
  })

  test('status codes and their bodies pass through', async () => {
    for (const code of [201, 404, 500]) {
      const response = await fetch(`${gw.url}/status/${code}`)
      expect(response.status).toBe(code)
      expect(await response.text()).toBe(`status ${code}`)
    }
  })
})

describe('streaming', () => {
  test('a response is streamed: the first chunk arrives before the origin sends the second', async () => {
    const response = await fetch(`${gw.url}/stream`)
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toBe('first\n')
    origin.release()
    let rest = ''
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      rest += new TextDecoder().decode(value)
    }
    expect(rest).toBe('second\n')
  })

  test('a request body is streamed: the origin sees each chunk before the client sends the next', async () => {
    const received: string[] = []
    const answer = new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        `${gw.url}/upload`,
        { method: 'POST', headers: { 'transfer-encoding': 'chunked' }, agent: false },
        (res) => {
          let text = ''
          res.on('data', (c) => {
            text += c
          })
          res.on('end', () => resolve(text))
        },
      )
      req.on('error', reject)
      let sent = 0
      const onChunk = (chunk: string) => {
        received.push(chunk)
        if (++sent < 3) req.write(`part-${sent}|`)
        else {
          origin.events.off('chunk', onChunk)
          req.end()
        }
      }
      origin.events.on('chunk', onChunk)
      req.write('part-0|')
    })
    // Each write waits for the origin to have the previous chunk: a buffering proxy would hang here.
    expect(await answer).toBe('part-0|part-1|part-2|')
    expect(received).toEqual(['part-0|', 'part-1|', 'part-2|'])
  })
})

describe('headers', () => {
  test('hop-by-hop request headers are stripped, others kept, X-Forwarded-* set', async () => {
    const response = await rawRequest(`${gw.url}/echo`, {
      headers: [
        'Connection',
        'keep-alive, x-hop-only',
        'X-Hop-Only',
        'secret',
        'Keep-Alive',
        'timeout=5',
        'TE',
        'trailers',
        'Proxy-Authorization',
        'Basic Zm9vOmJhcg==',
        'X-Forwarded-For',
        '203.0.113.9',
        'X-Custom',
        'kept',
        'Authorization',
        'Bearer end-to-end',
        'Cookie',
        'session=abc',
      ],
    })
    const seen = JSON.parse(response.body.toString()) as Echo
    expect(seen.headers['x-hop-only']).toBeUndefined()
    expect(seen.headers['keep-alive']).toBeUndefined()
    expect(seen.headers.te).toBeUndefined()
    expect(seen.headers['proxy-authorization']).toBeUndefined()
    expect(seen.headers['x-custom']).toBe('kept')
    expect(seen.headers.authorization).toBe('Bearer end-to-end')
    expect(seen.headers.cookie).toBe('session=abc')
    // The peer is no trusted proxy (no `identity`): its X-Forwarded-For is not passed on.
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1')
    expect(seen.headers['x-forwarded-host']).toBe(`127.0.0.1:${gw.gateway.port}`)
    expect(seen.headers['x-forwarded-proto']).toBe('http')
    expect(seen.headers.host).toBe(`127.0.0.1:${origin.port}`)
  })

  test('a `Proxy` request header is dropped (httpoxy: CGI would read it as HTTP_PROXY); Proxy-Status and others pass', async () => {
    const response = await rawRequest(`${gw.url}/echo`, {
      headers: [
        'Proxy',
        'http://203.0.113.9:8080',
        'Proxy-Connection',
        'keep-alive',
        'Proxy-Status',
        'cdn.example; error=http_request_error',
        'X-Proxy-Note',
        'kept',
      ],
    })
    const seen = JSON.parse(response.body.toString()) as Echo
    expect(seen.headers.proxy).toBeUndefined()
    expect(seen.headers['proxy-connection']).toBeUndefined()
    expect(seen.headers['proxy-status']).toBe('cdn.example; error=http_request_error')
    expect(seen.headers['x-proxy-note']).toBe('kept')
  })

  const CLAIMS = [
    'X-Forwarded-For',
    '203.0.113.9',
    'X-Forwarded-Host',
    'evil.example',
    'X-Forwarded-Proto',
    'https',
    'X-Forwarded-Port',
    '443',
    'Forwarded',
    'for=203.0.113.9;host=evil.example',
    'X-Real-IP',
    '203.0.113.9',
    'CF-Connecting-IP',
    '203.0.113.9',
    'True-Client-IP',
    '203.0.113.9',
  ]

  test("forwarding headers from a client that is no trusted proxy are replaced by the gateway's own", async () => {
    const response = await rawRequest(`${gw.url}/echo`, { headers: CLAIMS })
    const seen = JSON.parse(response.body.toString()) as Echo
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1')
    expect(seen.headers['x-forwarded-host']).toBe(`127.0.0.1:${gw.gateway.port}`)
    expect(seen.headers['x-forwarded-proto']).toBe('http')
    for (const name of ['x-forwarded-port', 'forwarded', 'x-real-ip', 'cf-connecting-ip', 'true-client-ip'])
      expect([name, seen.headers[name]]).toEqual([name, undefined])
  })

  test('from a trusted proxy (identity.trustedProxies) they are kept, and the peer is appended to X-Forwarded-For', async () => {
    const trusting = await startInProcess(`identity: { trustedProxies: [127.0.0.1/32] }\nrules: []\n`, {
      upstream: origin.url,
    })
    try {
      const response = await rawRequest(`${trusting.url}/echo`, { headers: CLAIMS })
      const seen = JSON.parse(response.body.toString()) as Echo
      expect(seen.headers['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1')
      expect(seen.headers['x-forwarded-host']).toBe('evil.example')
      expect(seen.headers['x-forwarded-proto']).toBe('https')
      expect(seen.headers.forwarded).toBe('for=203.0.113.9;host=evil.example')
      expect(seen.headers['x-real-ip']).toBe('203.0.113.9')
    } finally {
      await trusting.close()
    }
  })

  // CGI, WSGI and Rack name a header HTTP_<NAME with "-" as "_">: X_Forwarded_For would be read
  // as X-Forwarded-For (cf. Puma CVE-2024-45614).
  const UNDERSCORE_CLAIMS = [
    'X_Forwarded_For',
    '198.51.100.7',
    'X-Real_IP',
    '198.51.100.7',
    'X_Forwarded_Host',
    'evil.example',
    'x_forwarded_proto',
    'https',
    'True_Client_IP',
    '198.51.100.7',
    'CF_Connecting_IP',
    '198.51.100.7',
    'X_Custom_Id',
    'kept',
    'api_key',
    'kept too',
  ]
  /** The header names the origin received, each with "_" read as "-", as a CGI-style upstream reads them. */
  const cgiNames = (seen: Echo) =>
    seen.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase().replaceAll('_', '-'))

  test.each([
    ['no trusted proxy', ''],
    ['a trusted proxy', 'identity: { trustedProxies: [127.0.0.1/32] }\n'],
  ])(
    'underscore spellings of forwarding headers never reach the upstream (from %s); other underscore names pass',
    async (_, identity) => {
      const gateway = await startInProcess(`${identity}rules: []\n`, { upstream: origin.url })
      try {
        const response = await rawRequest(`${gateway.url}/echo`, { headers: UNDERSCORE_CLAIMS })
        const seen = JSON.parse(response.body.toString()) as Echo
        const names = cgiNames(seen)
        for (const name of ['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto'])
          expect([name, names.filter((n) => n === name).length]).toEqual([name, 1])
        for (const name of ['x-real-ip', 'true-client-ip', 'cf-connecting-ip'])
          expect([name, names.includes(name)]).toEqual([name, false])
        expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1')
        expect(seen.headers['x-forwarded-host']).toBe(`127.0.0.1:${gateway.gateway.port}`)
        expect(seen.headers['x-forwarded-proto']).toBe('http')
        expect(seen.headers.x_custom_id).toBe('kept')
        expect(seen.headers.api_key).toBe('kept too')
      } finally {
        await gateway.close()
      }
    },
  )

  test('hop-by-hop response headers are stripped; repeated Set-Cookie lines survive; rate-limit fields added', async () => {
    const response = await rawRequest(`${gw.url}/cookies`)
    expect(response.status).toBe(200)
    expect(response.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; Path=/'])
    expect(response.headers['x-origin-hop']).toBeUndefined()
    expect(response.headers['x-origin-kept']).toBe('yes')
    expect(response.headers['ratelimit-policy']).toBe('"everything";q=100000;w=1')
    expect(response.headers.ratelimit).toMatch(/^"everything";r=\d+;t=\d+$/)
    expect(response.body.toString()).toBe('ok')
  })
})

describe('trailers', () => {
  test("response trailer fields reach an HTTP/1.1 client, announced; the request's own do not reach the upstream, its body does", async () => {
    const answer = await new Promise<{
      headers: Record<string, unknown>
      body: string
      trailers: Record<string, unknown>
    }>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/trailers`, { method: 'POST', agent: false }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          body += c
        })
        res.on('end', () => resolve({ headers: res.headers, body, trailers: res.trailers }))
      })
      req.on('error', reject)
      req.setHeader('trailer', 'x-sum')
      req.write('abc')
      req.addTrailers({ 'x-sum': '42' })
      req.end()
    })
    // The upstream got the body and no trailer field: undici cannot send request trailers.
    expect(JSON.parse(answer.body)).toEqual({})
    expect(answer.headers).toMatchObject({ 'transfer-encoding': 'chunked', trailer: 'x-checksum, x-status' })
    expect(answer.headers['content-type']).toBe('application/json')
    // A trailer field that would say how to read the content (Content-Type) is not relayed.
    expect(answer.trailers).toEqual({
      'x-checksum': createHash('sha256').update(answer.body).digest('hex'),
      'x-status': 'done',
    })
  })

  test('an HTTP/1.0 client gets the body whole, without trailer fields or a Trailer header (no chunked coding to carry them)', async () => {
    const client = socketReader(connect(Number(new URL(gw.url).port), '127.0.0.1'))
    client.socket.write('GET /trailers HTTP/1.0\r\nhost: a\r\n\r\n')
    const text = await client.until()
    const split = text.indexOf('\r\n\r\n')
    const head = text.slice(0, split)
    expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(head).not.toMatch(/^(trailer|transfer-encoding):/im)
    expect(JSON.parse(text.slice(split + 4))).toEqual({})
  })
})

describe('informational responses', () => {
  test('a 103 Early Hints from the upstream is not relayed: the client gets the final 200, counted once', async () => {
    const hinted = await startInProcess(
      'rules: [{ name: all, algorithm: fixed-window, limit: 10, window: 1m }]\n',
      { upstream: origin.url },
    )
    try {
      const response = await rawRequest(`${hinted.url}/early`)
      expect(response.status).toBe(200)
      expect(response.body.toString()).toBe('after hints')
      expect(response.headers.ratelimit).toMatch(/^"all";r=9;t=\d+$/)
      expect(response.headers.link).toBeUndefined()
      const metrics = await (await fetch(`${hinted.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="200"} 1')
      expect(metrics).toContain('edgelimit_responses_total{code="200"} 1')
      expect(metrics).not.toContain('code="103"')
    } finally {
      await hinted.close()
    }
  })
})

describe('upstream status lines', () => {
  test('a reason phrase with a byte that is not ASCII is dropped: the client gets the status with its standard phrase', async () => {
    const upstream = createServer((socket) => {
      socket.on('error', () => {})
      socket.once('data', () =>
        socket.end(
          Buffer.from(
            'HTTP/1.1 404 N\xe3o Encontrado\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno',
            'latin1',
          ),
        ),
      )
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const { port } = upstream.address() as { port: number }
    const mine = await startInProcess('rules: []\n', { upstream: `http://127.0.0.1:${port}` })
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(mine.gateway.port, '127.0.0.1')
        let text = ''
        const timer = setTimeout(() => {
          socket.destroy()
          reject(new Error(`no complete answer within 3 s: ${JSON.stringify(text)}`))
        }, 3000)
        socket.on('error', reject)
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1')
          if (text.endsWith('\r\n\r\nno')) {
            clearTimeout(timer)
            socket.destroy()
            resolve(text)
          }
        })
        socket.write('GET /missing HTTP/1.1\r\nhost: a\r\n\r\n')
      })
      expect(answer.slice(0, answer.indexOf('\r\n'))).toBe('HTTP/1.1 404 Not Found')
      expect(mine.gateway.metrics.inFlight).toBe(0)
      const metrics = await (await fetch(`${mine.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="404"} 1')
    } finally {
      await mine.close()
      upstream.close()
    }
  })
  test('a problem is still sent after a writeHead that Node refused for its reason phrase', async () => {
    const server = createHttpServer((_, res) => {
      expect(() => res.writeHead(404, 'N\ufffdo Encontrado')).toThrow(/Invalid character in statusMessage/)
      sendProblem(res, 502, '/missing', 'The upstream could not be reached.')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as { port: number }
      const response = await rawRequest(`http://127.0.0.1:${port}/missing`)
      expect(response.status).toBe(502)
      expect(JSON.parse(response.body.toString())).toMatchObject({ status: 502, title: 'Bad Gateway' })
    } finally {
      server.close()
    }
  })
})

describe('upstream failures', () => {
  test('an unreachable upstream answers 502 problem+json, with the rate-limit fields', async () => {
    const closed = await new Promise<number>((resolve) => {
      const server = createServer()
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number }
        server.close(() => resolve(port))
      })
    })
    const down = await startInProcess(
      'rules: [{ name: all, algorithm: fixed-window, limit: 10, window: 1m }]\n',
      { upstream: `http://127.0.0.1:${closed}` },
    )
    try {
      const response = await fetch(`${down.url}/anything`)
      expect(response.status).toBe(502)
      expect(response.headers.get('content-type')).toBe('application/problem+json')
      expect(response.headers.get('ratelimit')).toMatch(/^"all";r=9;t=\d+$/)
      const problem = (await response.json()) as Record<string, unknown>
      expect(problem).toMatchObject({ status: 502, title: 'Bad Gateway', instance: '/anything' })
      expect(String(problem.detail)).toContain('ECONNREFUSED')
      const metrics = await (await fetch(`${down.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="error"} 1')
      expect(metrics).toContain('edgelimit_responses_total{code="502"} 1')
    } finally {
      await down.close()
    }
  })

  test('an upstream that closes without answering, answers with what is not HTTP (a status outside 100–599 included) or with an interim status undici refuses: a 502 that says so, not "could not be reached"', async () => {
    // Each upstream reads the request head, then answers it with `answer` (nothing: it closes).
    const answers: [string, RegExp][] = [
      ['', /^The upstream closed the connection before it answered \(UND_ERR_SOCKET\)\.$/],
      [
        'HTTP/1.1 200 OK\r\nx-bad: a\x01b\r\ncontent-length: 2\r\n\r\nok',
        /^The upstream's answer is not valid HTTP \(.*Invalid header value char.*\)\.$/,
      ],
      ['HELLO\r\n\r\n', /^The upstream's answer is not valid HTTP \(.+\)\.$/],
      [
        `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(20_000)}\r\ncontent-length: 2\r\n\r\nok`,
        /^The upstream's answer is not valid HTTP \(UND_ERR_HEADERS_OVERFLOW\)\.$/,
      ],
      // A status outside 100–599 (RFC 9110 §15): undici asserts one below 100, passes one above on.
      [
        'HTTP/1.1 099 Low\r\ncontent-length: 2\r\n\r\nok',
        /^The upstream's answer is not valid HTTP \(a status below 100\)\.$/,
      ],
      [
        'HTTP/1.1 600 High\r\ncontent-length: 2\r\n\r\nok',
        /^The upstream's answer is not valid HTTP \(status 600 is not one of 100–599\)\.$/,
      ],
      // A body in a transfer coding its HTTP client does not take off: relayed, it would pass as plain.
      [
        'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
        /^The upstream's answer is in a transfer coding the gateway does not decode \(Transfer-Encoding: gzip, chunked\)\.$/,
      ],
      // It did answer: with an interim status undici drops the connection for.
      [
        'HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: h2c\r\n\r\n',
        /^The upstream switched protocols \(101\) for a request that asked for no upgrade \(UND_ERR_SOCKET: bad upgrade\)\.$/,
      ],
      // A 101 without `Connection: upgrade`, which undici asserts against.
      [
        'HTTP/1.1 101 Switching Protocols\r\n\r\n',
        /^The upstream switched protocols \(101\) for a request that asked for no upgrade \(a 101 without Connection: upgrade\)\.$/,
      ],
      [
        'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
        /^The upstream sent a 100 Continue the gateway did not ask for, which its HTTP client does not take \(UND_ERR_SOCKET: bad response\)\.$/,
      ],
    ]
    for (const [answer, detail] of answers) {
      const upstream = createServer((socket) => {
        socket.on('error', () => {})
        socket.once('data', () => socket.end(Buffer.from(answer, 'latin1')))
      })
      await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
      const { port } = upstream.address() as { port: number }
      const mine = await startInProcess('rules: []\n', { upstream: `http://127.0.0.1:${port}` })
      try {
        const response = await fetch(`${mine.url}/orders`)
        expect(response.status).toBe(502)
        const problem = (await response.json()) as { detail: string }
        expect(problem.detail, JSON.stringify(answer.slice(0, 30))).toMatch(detail)
      } finally {
        await mine.close()
        upstream.close()
      }
    }
  })

  test('requests waiting for a free connection of a stalled upstream get their 504 within upstream.timeout too, not one timeout after another', async () => {
    // Takes each request and never answers: the one connection stays busy until its timeout.
    const stalled = createServer((socket) => socket.on('error', () => {}).resume())
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))
    const { port } = stalled.address() as { port: number }
    const busy = await startInProcess(
      `upstream: { url: http://127.0.0.1:${port}, timeout: 1s, connections: 1 }\nrules: []\n`,
    )
    try {
      const started = performance.now()
      const answers = await Promise.all(
        [1, 2, 3, 4].map(async (i) => {
          const response = await fetch(`${busy.url}/wait/${i}`, {
            method: i === 4 ? 'POST' : 'GET',
            body: i === 4 ? 'x' : undefined,
          })
          const problem = (await response.json()) as { detail: string }
          return { status: response.status, detail: problem.detail, ms: performance.now() - started }
        }),
      )
      // Waiting in line: about the timeout each (undici times the first in steps of 0.5 s), not 2, 3, 4 s.
      for (const answer of answers) {
        expect(answer.status).toBe(504)
        expect(answer.ms).toBeLessThan(3000)
      }
      expect(answers.slice(1).map((a) => a.detail)).toContain(
        'The upstream did not answer in time (no connection to it was free within upstream.timeout: all 1 busy or being opened).',
      )
      await expect.poll(() => busy.gateway.metrics.inFlight).toBe(0)
      const metrics = await (await fetch(`${busy.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_responses_total{code="504"} 4')
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="error"} 4')
    } finally {
      await busy.close()
      stalled.close()
    }
  })

  test('a 502 sent while the request body is still unread closes the connection: the rest of the body is not waited for, nothing after it is served', async () => {
    // Each upstream fails before its answer's head: refused, or closed once the head is in. (A
    // 504 cannot come while the body is being sent: undici's headersTimeout waits for its end.)
    const refused = createServer()
    const closes = createServer((socket) => {
      socket.on('error', () => {})
      socket.once('data', () => socket.destroy())
    })
    for (const server of [refused, closes]) {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    }
    const port = (server: typeof refused) => (server.address() as { port: number }).port
    const refusedPort = port(refused)
    await new Promise((resolve) => refused.close(resolve))
    const cases: [number, number, string][] = [
      [refusedPort, 502, 'ECONNREFUSED'],
      [port(closes), 502, 'UND_ERR_SOCKET'],
    ]
    try {
      for (const [upstreamPort, status, reason] of cases) {
        const failing = await startInProcess(
          `upstream: http://127.0.0.1:${upstreamPort}\nclients: { requestTimeout: 5s }\nrules: []\n`,
        )
        try {
          const client = socketReader(connect(failing.gateway.port, '127.0.0.1'))
          client.socket.write('POST /upload HTTP/1.1\r\nhost: a\r\ncontent-length: 100000\r\n\r\nabc')
          const answer = await client.until((t) => t.endsWith('}'))
          const answered = performance.now()
          expect(answer, reason).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
          expect(answer, reason).toContain(reason)
          expect(answer, reason).toMatch(/\r\nconnection: close\r\n/i)
          // The client goes on sending its body, then another request: neither is waited for.
          client.socket.write(`${'b'.repeat(99_997)}GET /next HTTP/1.1\r\nhost: a\r\n\r\n`)
          await client.until()
          // Closed once the answer is out, not by requestTimeout (5 s) nor after a second answer.
          expect(performance.now() - answered, reason).toBeLessThan(2_500)
          expect(client.text, reason).toBe(answer)
          const metrics = await (await fetch(`${failing.admin}/metrics`)).text()
          expect(metrics, reason).toContain(`edgelimit_responses_total{code="${status}"} 1`)
          expect(metrics, reason).not.toContain('edgelimit_responses_total{code="408"}')
        } finally {
          await failing.close()
        }
      }
    } finally {
      closes.close()
    }
  })

  test('an upstream slower than its timeout answers 504; an upstream path prefix is kept', async () => {
    const slow = await startInProcess(`upstream: { url: ${origin.url}/base, timeout: 200ms }\nrules: []\n`)
    try {
      const started = performance.now()
      const response = await fetch(`${slow.url}/slow?ms=2000`)
      expect(response.status).toBe(504)
      expect(performance.now() - started).toBeLessThan(1500)
      expect(((await response.json()) as { title: string }).title).toBe('Gateway Timeout')
      const seen = await echo(await fetch(`${slow.url}/x?y=1`))
      expect(seen.url).toBe('/base/x?y=1')
    } finally {
      await slow.close()
    }
  })
})

describe('a client that stops reading its answer', () => {
  test('is cut off after upstream.bodyTimeout without a byte read, and its upstream connection serves others again', async () => {
    const mine = await startInProcess(
      `upstream: { url: ${origin.url}, timeout: 10s, bodyTimeout: 1s, connections: 1 }\nrules: []\n`,
    )
    const reader = connect(mine.gateway.port, '127.0.0.1')
    try {
      reader.on('error', () => {})
      // Asks for far more than the socket buffers on both sides hold, and never reads a byte.
      reader.pause()
      const started = arrival(origin, '/big')
      reader.write(`GET /big?bytes=${200 * 1024 * 1024} HTTP/1.1\r\nhost: a\r\n\r\n`)
      await started
      // The one upstream connection is the stalled answer's until it is cut off.
      const before = performance.now()
      const other = await fetch(`${mine.url}/echo`)
      expect(other.status).toBe(200)
      expect(performance.now() - before).toBeLessThan(6000)
      await expect.poll(() => mine.gateway.metrics.inFlight).toBe(0)
      const metrics = await (await fetch(`${mine.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_responses_total{code="aborted"} 1')
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="aborted"} 1')
    } finally {
      reader.destroy()
      await mine.close()
    }
  })
})

describe('client aborts', () => {
  test('a client that leaves in the middle of its body is counted as 499 aborted, not as an upstream error', async () => {
    const mine = await startInProcess('rules: []\n', { upstream: origin.url })
    try {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(`${mine.url}/upload`, {
          method: 'POST',
          headers: { 'content-length': '1000' },
          agent: false,
        })
        req.on('error', () => {})
        const onChunk = () => {
          origin.events.off('chunk', onChunk)
          // The origin has the first part: the exchange is under way when the client goes.
          setTimeout(() => {
            req.destroy()
            resolve()
          }, 300)
        }
        origin.events.on('chunk', onChunk)
        req.write('part-0|', (error) => error && reject(error))
      })
      let metrics = ''
      for (let i = 0; i < 100 && !/edgelimit_in_flight_requests 0\b/.test(metrics); i++) {
        await new Promise((r) => setTimeout(r, 20))
        metrics = await (await fetch(`${mine.admin}/metrics`)).text()
      }
      expect(metrics).toContain('edgelimit_responses_total{code="499"} 1')
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="aborted"} 1')
      expect(metrics).not.toContain('code="502"')
      expect(metrics).not.toContain('code="error"')
    } finally {
      await mine.close()
    }
  })
  test('a client that leaves while a later request of its keep-alive connection waits is counted as 499, not as an upstream failure', async () => {
    const mine = await startInProcess('rules: []\n', { upstream: origin.url })
    try {
      const client = socketReader(connect(mine.gateway.port, '127.0.0.1'))
      // Its first answer (chunked) complete: the second request is the connection's next.
      client.socket.write('GET /first HTTP/1.1\r\nhost: a\r\n\r\n')
      await client.until((text) => text.endsWith('\r\n0\r\n\r\n'))
      const arrived = arrival(origin, '/slow')
      client.socket.write('GET /slow?ms=3000 HTTP/1.1\r\nhost: a\r\n\r\n')
      await arrived
      client.socket.destroy()
      await expect.poll(() => mine.gateway.metrics.inFlight).toBe(0)
      const metrics = await (await fetch(`${mine.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_responses_total{code="499"} 1')
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="aborted"} 1')
      expect(metrics).not.toContain('code="502"')
      expect(metrics).not.toContain('code="error"')
      expect(mine.logs.filter((l) => l.msg === 'upstream failed')).toEqual([])
    } finally {
      await mine.close()
    }
  })

  test('a pipelined answer arriving while the one before it waits for the client is relayed, both complete', async () => {
    const mine = await startInProcess('rules: []\n', { upstream: origin.url })
    const size = 64 * 1024 * 1024
    const socket = connect(mine.gateway.port, '127.0.0.1')
    try {
      socket.pause()
      socket.write(
        `GET /big?bytes=${size} HTTP/1.1\r\nhost: a\r\n\r\nGET /stream HTTP/1.1\r\nhost: a\r\n\r\n`,
      )
      // The client reads nothing: by now the first answer waits for it (buffers full, nothing to poll).
      await new Promise((r) => setTimeout(r, 1000))
      origin.release()
      const received = await new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = []
        let length = 0
        // 64 MB through client, gateway and origin, all in this one process: on a loaded 2-core
        // machine that took over 10 s. A relay that stalls still fails here, with the count.
        const timer = setTimeout(() => reject(new Error(`only ${length} bytes within 45 s`)), 45_000)
        socket.on('error', reject)
        socket.on('close', () => reject(new Error(`closed after ${length} bytes`)))
        socket.on('data', (chunk: Buffer) => {
          chunks.push(chunk)
          length += chunk.length
          if (
            length > size &&
            /second\n(\r\n0\r\n\r\n)?$/.test(Buffer.concat(chunks.slice(-2)).toString('latin1'))
          ) {
            clearTimeout(timer)
            const tail = Buffer.concat(chunks).subarray(size).toString('latin1')
            resolve(tail.slice(tail.indexOf('HTTP/1.1 ')))
          }
        })
        socket.resume()
      })
      expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      expect(received).toContain('first\n')
      const metrics = await (await fetch(`${mine.admin}/metrics`)).text()
      expect(metrics).not.toContain('code="error"')
    } finally {
      socket.destroy()
      await mine.close()
    }
  })

  test('clients that pipeline two requests and leave mid-answer free every upstream connection', async () => {
    // Two upstream connections: two leaked exchanges would leave none for anyone else.
    const mine = await startInProcess(`upstream: { url: "${origin.url}", connections: 2 }\nrules: []\n`)
    try {
      for (let i = 0; i < 2; i++) {
        await new Promise<void>((resolve) => {
          const socket = connect(mine.gateway.port, '127.0.0.1')
          let received = 0
          socket.on('error', () => {})
          socket.on('data', (chunk: Buffer) => {
            received += chunk.length
            // The first answer is streaming (and paused, the client no longer reads): leave.
            if (received > 1024 * 1024) socket.destroy()
          })
          socket.on('close', () => resolve())
          socket.write(
            `GET /big?bytes=${64 * 1024 * 1024} HTTP/1.1\r\nhost: a\r\n\r\nGET /echo HTTP/1.1\r\nhost: a\r\n\r\n`,
          )
        })
      }
      const response = await fetch(`${mine.url}/echo`, { signal: AbortSignal.timeout(3000) })
      expect(response.status).toBe(200)
      await response.text()
      for (let i = 0; i < 150 && mine.gateway.metrics.inFlight !== 0; i++)
        await new Promise((r) => setTimeout(r, 20))
      expect(mine.gateway.metrics.inFlight).toBe(0)
      const metrics = await (await fetch(`${mine.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="aborted"} 2')
    } finally {
      await mine.close()
    }
  })
})

describe('graceful shutdown', () => {
  test('an answer whose head is still to come when the drain begins says Connection: close, not keep-alive', async () => {
    // Its connection closes once the last request in flight is done: a keep-alive answer would
    // invite the client's next request onto it, and that request would be lost.
    const mine = await startInProcess('rules: []\n', { upstream: origin.url })
    const arrived = arrival(origin, '/slow')
    const answer = new Promise<IncomingMessage>((resolve, reject) => {
      httpRequest(`${mine.url}/slow?ms=300`, { agent: new Agent({ keepAlive: true }) }, resolve)
        .on('error', reject)
        .end()
    })
    await arrived
    const closing = mine.close()
    const response = await answer
    response.resume()
    expect(response.statusCode).toBe(200)
    expect(response.headers.connection).toBe('close')
    await closing
  })
})

test('every request above was accounted for: none left in flight', async () => {
  await new Promise((r) => setTimeout(r, 50))
  expect(gw.gateway.metrics.inFlight).toBe(0)
  const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
  expect(metrics).toContain('edgelimit_in_flight_requests 0')
})
