// `clients:`: the timeouts clients are held to (Node's headers, request and keep-alive timeouts)
// and the largest request body, over raw sockets; validated like every section; a reload applies them.
import { writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { parseDuration } from 'edgelimit'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { parsePolicyText } from '../src/config/source.js'
import { checkSource } from '../src/config/validate.js'
import {
  type InProcess,
  runCli,
  type SocketReader,
  socketReader,
  startInProcess,
  tempDir,
  writePolicy,
} from './support/gateway.js'

/**
 * The fixed windows' length: they count on the system clock, and a test that spanned the end of
 * one (an hour's at XX:00:00) would see its count start again.
 */
const WINDOW = farWindow()
const WINDOW_S = (parseDuration(WINDOW) as number) / 1000

/** An upstream that records each request: its bytes, and whether its body arrived whole. */
interface Seen {
  url: string
  bytes: number
  /** Resolves when the request ends: true if its body was complete, false if it was cut off. */
  ended: Promise<boolean>
  /** `/slow/…` only: called when the gateway closed the connection, true if unanswered. */
  abandoned?: (unanswered: boolean) => void
}
let upstream: Server
let upstreamUrl: string
const seen: Seen[] = []

beforeAll(async () => {
  upstream = createServer((req: IncomingMessage, res) => {
    const record: Seen = {
      url: req.url ?? '',
      bytes: 0,
      ended: new Promise((resolve) => {
        req.once('end', () => resolve(true))
        req.once('close', () => resolve(req.complete))
      }),
    }
    seen.push(record)
    // `/early/…` answers its head at once and echoes the body as it comes; `/ahead/…` answers at
    // once, whole, without reading the body; others answer at its end.
    if (req.url?.startsWith('/early')) res.writeHead(200, { 'content-type': 'application/octet-stream' })
    if (req.url?.startsWith('/ahead')) res.end('ahead')
    // `/slow/…` is never answered: its request stays open until the gateway gives it up.
    if (req.url?.startsWith('/slow')) {
      res.once('close', () => record.abandoned?.(!res.writableFinished))
      return
    }
    req.on('data', (chunk: Buffer) => {
      record.bytes += chunk.length
      if (req.url?.startsWith('/early')) res.write(chunk)
    })
    req.on('end', () => res.writableEnded || res.end(`got ${record.bytes}`))
  })
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
})
afterAll(async () => {
  upstream.closeAllConnections()
  await new Promise((r) => upstream.close(r))
})

const running: InProcess[] = []
afterEach(async () => {
  for (const gw of running.splice(0)) await gw.close()
  seen.length = 0
})
async function gateway(policy: string): Promise<InProcess> {
  const gw = await startInProcess(policy, { upstream: upstreamUrl })
  running.push(gw)
  return gw
}

/** A raw connection to `gw`: what it received so far, and when it closed (ms since `open`). */
function open(gw: InProcess): SocketReader {
  return socketReader(connect(gw.gateway.port, '127.0.0.1'))
}

const headEnd = (text: string) => text.includes('\r\n\r\n')
/** The status of a POST that declares `length` bytes and sends none (a refusal must not wait for them). */
async function declared(gw: InProcess, path: string, length: number): Promise<string> {
  const client = open(gw)
  client.socket.write(`POST ${path} HTTP/1.1\r\nhost: a\r\ncontent-length: ${length}\r\n\r\n`)
  const text = await client.until(headEnd)
  client.socket.destroy()
  return text.slice(0, text.indexOf('\r\n'))
}
const metric = async (gw: InProcess, code: number) => {
  const text = await (await fetch(`${gw.admin}/metrics`)).text()
  return Number(new RegExp(`edgelimit_responses_total\\{code="${code}"\\} (\\d+)`).exec(text)?.[1] ?? 0)
}

/** The count of `code` once the request under way has been counted (after its connection closed). */
async function settled(gw: InProcess, code: number): Promise<number> {
  for (let i = 0; i < 100 && gw.gateway.metrics.inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10))
  return metric(gw, code)
}

describe('timeouts', () => {
  test('a client that dribbles its headers past headersTimeout gets a 408 problem and is dropped within seconds (not after Node’s 30 s check)', async () => {
    const gw = await gateway('clients: { headersTimeout: 1s }\nrules: []\n')
    const slow = open(gw)
    slow.socket.write('GET /slow HTTP/1.1\r\nhost: a\r\n')
    const dribble = setInterval(() => slow.socket.write('x-more: 1\r\n'), 100)
    try {
      // A client that sends its request at once is served meanwhile.
      const quick = open(gw)
      quick.socket.write('GET /quick HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n')
      expect(await quick.until()).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      expect(slow.text).toBe('')

      const answer = await slow.until()
      expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/)
      expect(answer).toContain('application/problem+json')
      expect(answer).toMatch(/\r\nconnection: close\r\n/i)
      // A timeout, said as one: not "not valid HTTP/1.1".
      const problem = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { detail: string }
      expect(problem.detail).toBe(
        'The request did not arrive in time (clients.headersTimeout for its headers, clients.requestTimeout for all of it).',
      )
      // Never before the timeout; well before Node's default 30 s check would have noticed it.
      expect(slow.closedAfter).toBeGreaterThanOrEqual(950)
      expect(slow.closedAfter).toBeLessThan(10_000)
      expect(seen.map((s) => s.url)).toEqual(['/quick'])
      expect(await metric(gw, 408)).toBe(1)
    } finally {
      clearInterval(dribble)
    }
  })

  test('a body that does not arrive within requestTimeout ends with a 408; the upstream sees it cut off', async () => {
    const gw = await gateway('clients: { headersTimeout: 1s, requestTimeout: 2s }\nrules: []\n')
    const slow = open(gw)
    slow.socket.write('POST /upload HTTP/1.1\r\nhost: a\r\ncontent-length: 100\r\n\r\n0123456789')
    const answer = await slow.until()
    expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/)
    expect(answer).toContain('"detail":"The request did not arrive in time')
    expect(slow.closedAfter).toBeGreaterThanOrEqual(1_950)
    expect(slow.closedAfter).toBeLessThan(15_000)
    expect(await seen[0]?.ended).toBe(false)
    // Counted as what the client got, not as a client that went away (499).
    expect(await settled(gw, 408)).toBe(1)
    expect(await metric(gw, 499)).toBe(0)
  })

  test('a body Node’s parser refuses after the head (Transfer-Encoding: gzip) is counted as its 400', async () => {
    const gw = await gateway('rules: []\n')
    const client = open(gw)
    client.socket.write(`POST /gz HTTP/1.1\r\nhost: a\r\ntransfer-encoding: gzip\r\n\r\n${'x'.repeat(100)}`)
    expect(await client.until()).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
    expect(await settled(gw, 400)).toBe(1)
    expect(await metric(gw, 499)).toBe(0)
  })

  test('keepAliveTimeout closes an idle connection after its last answer', async () => {
    const gw = await gateway('clients: { keepAliveTimeout: 1s }\nrules: []\n')
    const client = open(gw)
    client.socket.write('GET /a HTTP/1.1\r\nhost: a\r\n\r\n')
    await client.until((t) => t.includes('got 0'))
    const answered = performance.now()
    await client.until()
    const idle = performance.now() - answered
    expect(idle).toBeGreaterThanOrEqual(900)
    expect(idle).toBeLessThan(10_000)
  })
})

describe('maxBodySize', () => {
  // One request per client: were a refused request charged, the next one would be denied.
  const POLICY = `clients: { maxBodySize: 1kb }
rules: [{ name: once, key: global, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]
`

  test('a Content-Length over the limit is refused with 413 before its body is read or any rule charged; the upstream never sees it', async () => {
    const gw = await gateway(POLICY)
    const big = open(gw)
    // Only the head: the gateway must answer without waiting for 1025 bytes.
    big.socket.write('POST /big HTTP/1.1\r\nhost: a\r\ncontent-length: 1025\r\n\r\n')
    const answer = await big.until()
    expect(answer).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\n/)
    expect(answer).toMatch(/\r\nconnection: close\r\n/i)
    expect(answer).not.toMatch(/\r\nratelimit/i)
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
      title: 'Content Too Large',
      status: 413,
      instance: '/big',
    })
    expect(big.closedAfter).toBeDefined()
    expect(seen).toEqual([])
    expect(await metric(gw, 413)).toBe(1)

    // Exactly the limit passes, and is the rule's first request.
    const body = 'x'.repeat(1024)
    const exact = await fetch(`${gw.url}/exact`, { method: 'POST', body })
    expect([exact.status, await exact.text()]).toEqual([200, 'got 1024'])
    expect((await fetch(`${gw.url}/again`)).status).toBe(429)
  })

  test('with Expect: 100-continue, the 413 comes instead of 100 Continue', async () => {
    const gw = await gateway(POLICY)
    const big = open(gw)
    big.socket.write(
      'PUT /big HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 1048576\r\n\r\n',
    )
    const answer = await big.until()
    expect(answer).toMatch(/^HTTP\/1\.1 413 /)
    expect(answer).not.toContain('100 Continue')
    expect(seen).toEqual([])
  })

  test('a chunked body that grows past the limit: the upstream request is aborted, the client gets 413 (nothing was sent yet)', async () => {
    const gw = await gateway(POLICY)
    const client = open(gw)
    client.socket.write('POST /chunked HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n')
    client.socket.write(`200\r\n${'a'.repeat(512)}\r\n`)
    // The first 512 bytes are on their way to the upstream before the rest comes.
    for (let i = 0; i < 1000 && (seen[0]?.bytes ?? 0) < 512; i++) await new Promise((r) => setTimeout(r, 10))
    expect(seen[0]?.bytes).toBe(512)
    client.socket.write(`201\r\n${'b'.repeat(513)}\r\n`)
    const answer = await client.until()
    expect(answer).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\n/)
    expect(answer).toMatch(/\r\nconnection: close\r\n/i)
    // The rule charged it (it was admitted before its size was known): its fields are on the 413.
    expect(answer).toMatch(new RegExp(`\r\nratelimit-policy: "once";q=1;w=${WINDOW_S}\r\n`, 'i'))
    expect(client.closedAfter).toBeDefined()
    expect(await seen[0]?.ended).toBe(false)
    expect(seen[0]?.bytes).toBeLessThanOrEqual(1024)
    expect(await metric(gw, 413)).toBe(1)
  })

  // RFC 9112 §9.6: after an answer with `Connection: close`, no further request on the connection
  // is processed. Each test sends both requests in one write, so Node parses the second at once.
  test('a request pipelined behind a Content-Length 413 is neither charged nor forwarded', async () => {
    const gw = await gateway(POLICY)
    const client = open(gw)
    client.socket.write(
      `POST /big HTTP/1.1\r\nhost: a\r\ncontent-length: 2000\r\n\r\n${'x'.repeat(2000)}` +
        'POST /transfer HTTP/1.1\r\nhost: a\r\ncontent-length: 0\r\n\r\n',
    )
    const answer = await client.until()
    expect(answer.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 413'])
    // The rule's one request is still there.
    expect((await fetch(`${gw.url}/after`)).status).toBe(200)
    expect(seen.map((s) => s.url)).toEqual(['/after'])
    expect(await metric(gw, 499)).toBe(0)
  })

  test('a request pipelined behind a chunked 413 is neither charged nor forwarded', async () => {
    const gw = await gateway(POLICY.replace('limit: 1', 'limit: 2'))
    const client = open(gw)
    client.socket.write(
      `POST /chunked HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n7d0\r\n${'x'.repeat(2000)}\r\n0\r\n\r\n` +
        'POST /transfer HTTP/1.1\r\nhost: a\r\ncontent-length: 0\r\n\r\n',
    )
    const answer = await client.until()
    expect(answer.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 413'])
    // The chunked request was charged (admitted before its size was known); the pipelined one not.
    expect((await fetch(`${gw.url}/after`)).status).toBe(200)
    expect((await fetch(`${gw.url}/again`)).status).toBe(429)
    // (Whether the upstream saw the start of /chunked depends on how soon its connection was up.)
    expect(seen.map((s) => s.url).filter((url) => url !== '/chunked')).toEqual(['/after'])
    expect(await metric(gw, 499)).toBe(0)
  })

  test('nor is one pipelined behind a 429 to Expect: 100-continue (it closes the connection too)', async () => {
    const gw = await gateway(POLICY)
    expect((await fetch(`${gw.url}/first`)).status).toBe(200)
    const client = open(gw)
    client.socket.write(
      'POST /denied HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 5\r\n\r\nhello' +
        'GET /next HTTP/1.1\r\nhost: a\r\n\r\n',
    )
    const answer = await client.until()
    expect(answer.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 429'])
    expect(await metric(gw, 429)).toBe(1)
    expect(await metric(gw, 499)).toBe(0)
  })

  test('a chunked body within the limit reaches the upstream whole', async () => {
    const gw = await gateway(POLICY)
    const client = open(gw)
    client.socket.write(
      `POST /chunked HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n200\r\n${'a'.repeat(512)}\r\n200\r\n${'b'.repeat(512)}\r\n0\r\n\r\n`,
    )
    const answer = await client.until()
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(answer).toContain('got 1024')
    expect(await seen[0]?.ended).toBe(true)
  })

  test('a chunked body that grows past the limit after the upstream has answered: the connection is closed', async () => {
    const gw = await gateway(POLICY)
    const client = open(gw)
    client.socket.write('POST /early HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n')
    client.socket.write(`200\r\n${'a'.repeat(512)}\r\n`)
    // The upstream's head and its echo of the first chunk are relayed.
    await client.until((t) => headEnd(t) && t.includes('a'.repeat(512)))
    expect(client.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    client.socket.write(`201\r\n${'b'.repeat(513)}\r\n`)
    const answer = await client.until()
    expect(client.closedAfter).toBeDefined()
    // No second answer, and no end of the chunked one: the client sees it cut off.
    expect(answer).not.toContain('413')
    expect(answer).not.toContain('\r\n0\r\n\r\n')
    expect(await seen[0]?.ended).toBe(false)
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
    expect(metrics).toContain('edgelimit_responses_total{code="aborted"} 1')
  })
})

// RFC 9112 §9.6: a server that closes at once with a body unread may make the client's TCP stack
// reset the connection, and a client that reads only once it has sent its body (curl does)
// loses the answer. The gateway half-closes and reads (and discards) what comes, as nginx does.
describe('lingering close', () => {
  /** Sends a head and `bodyBytes` without reading; reads once they have all gone out (or failed). */
  function sendThenRead(
    gw: InProcess,
    head: string,
    bodyBytes: number,
  ): Promise<{ text: string; error?: string }> {
    return new Promise((resolve) => {
      const socket = connect(gw.gateway.port, '127.0.0.1')
      let text = ''
      let error: string | undefined
      socket.pause()
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1')
      })
      socket.on('error', (e: Error & { code?: string }) => {
        error = e.code
      })
      socket.on('close', () => resolve({ text, ...(error === undefined ? {} : { error }) }))
      socket.write(head)
      socket.write(Buffer.alloc(bodyBytes, 120), () => socket.resume())
    })
  }
  const answered = (text: string) => {
    const at = text.indexOf('\r\n\r\n')
    const length = Number(/\r\ncontent-length: (\d+)\r\n/i.exec(text)?.[1])
    return at > 0 && text.length - at - 4 === length ? text.slice(0, text.indexOf('\r\n')) : text
  }
  const BIG = 8 * 1024 * 1024

  test('a 413 to a declared Content-Length reaches a client that sends its whole body first', async () => {
    const gw = await gateway('clients: { maxBodySize: 1kb }\nrules: []\n')
    const got = await sendThenRead(gw, `POST /big HTTP/1.1\r\nhost: a\r\ncontent-length: ${BIG}\r\n\r\n`, BIG)
    expect(got).toEqual({ text: expect.any(String) })
    expect(answered(got.text)).toBe('HTTP/1.1 413 Payload Too Large')
    expect(seen).toEqual([])
  })

  // Without `Connection: close` a 429 keeps the connection, and Node reads the body it skips.
  test('so does a 429 to a request with a body and Connection: close, and one to Expect: 100-continue sent on regardless', async () => {
    const gw = await gateway(
      `rules: [{ name: none, key: global, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`,
    )
    expect((await fetch(`${gw.url}/first`)).status).toBe(200)
    const plain = await sendThenRead(
      gw,
      `POST /up HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-length: ${BIG}\r\n\r\n`,
      BIG,
    )
    expect(answered(plain.text)).toBe('HTTP/1.1 429 Too Many Requests')
    expect(plain.error).toBeUndefined()
    const expecting = await sendThenRead(
      gw,
      `PUT /up HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: ${BIG}\r\n\r\n`,
      BIG,
    )
    expect(answered(expecting.text)).toBe('HTTP/1.1 429 Too Many Requests')
    expect(expecting.error).toBeUndefined()
    expect(seen.map((s) => s.url)).toEqual(['/first'])
  })
})

describe('an upstream that answers before the body is complete', () => {
  test('its answer closes the connection: the rest of the body is not waited for, nothing pipelined after it is served', async () => {
    const gw = await gateway('clients: { requestTimeout: 3s }\nrules: []\n')
    const client = open(gw)
    client.socket.write(
      `POST /ahead HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n10\r\n${'a'.repeat(16)}\r\n`,
    )
    const answer = await client.until((t) => t.endsWith('ahead'))
    const answered = performance.now()
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(answer).toMatch(/\r\nconnection: close\r\n/i)
    // The client goes on sending its body, then another request.
    for (let i = 0; i < 6; i++) client.socket.write(`4000\r\n${'b'.repeat(0x4000)}\r\n`)
    client.socket.write('0\r\n\r\nGET /next HTTP/1.1\r\nhost: a\r\n\r\n')
    await client.until()
    // Closed once the answer is out, not by requestTimeout's 408 (3 s).
    expect(performance.now() - answered).toBeLessThan(2_000)
    expect(client.text).toBe(answer)
    expect(seen.map((s) => s.url)).toEqual(['/ahead'])
    expect(await metric(gw, 200)).toBe(1)
    expect(await metric(gw, 408)).toBe(0)
  })

  test('a body read whole before the answer keeps the connection open', async () => {
    const gw = await gateway('rules: []\n')
    const client = open(gw)
    client.socket.write('POST /a HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\nabc')
    expect(await client.until((t) => t.endsWith('got 3'))).not.toMatch(/\r\nconnection: close\r\n/i)
    client.socket.write(
      'POST /b HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
    )
    expect(await client.until()).toMatch(/got 3[\s\S]*got 3$/)
  })
})

describe('pipelined requests on a connection that dies', () => {
  test('the one being served is aborted upstream, the one queued behind it never starts, nothing stays counted', async () => {
    const gw = await gateway(
      `rules: [{ name: r, key: global, algorithm: fixed-window, limit: 10, window: ${WINDOW} }]\n`,
    )
    const errors: unknown[] = []
    const onError = (error: unknown) => errors.push(error)
    process.on('unhandledRejection', onError).on('uncaughtException', onError)
    try {
      const client = open(gw)
      client.socket.write(
        'GET /slow/1 HTTP/1.1\r\nhost: a\r\n\r\nPOST /second HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\nhi',
      )
      for (let i = 0; i < 300 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
      const slow = seen[0] as Seen
      const abandoned = new Promise<boolean>((r) => {
        slow.abandoned = r
      })
      expect(gw.gateway.metrics.inFlight).toBe(1)
      client.socket.destroy()
      expect(await abandoned).toBe(true)
      expect(await settled(gw, 499)).toBe(1)
      expect(gw.gateway.metrics.inFlight).toBe(0)
      expect(gw.gateway.metrics.tunnels).toBe(0)
      // The second was neither forwarded nor charged: the rule has had one request.
      const after = await fetch(`${gw.url}/after`)
      expect(after.headers.get('ratelimit')).toMatch(/^"r";r=8;/)
      expect(seen.map((s) => s.url)).toEqual(['/slow/1', '/after'])
      expect(await metric(gw, 200)).toBe(1)
      // A connection that comes next is served as usual.
      expect((await fetch(`${gw.url}/again`)).status).toBe(200)
      await new Promise((r) => setImmediate(r))
      expect(errors).toEqual([])
    } finally {
      process.off('unhandledRejection', onError).off('uncaughtException', onError)
    }
  })
})

describe('validation', () => {
  const issues = (clients: string) =>
    checkSource(parsePolicyText(`clients: ${clients}\nrules: []\n`, 'clients.yaml', {})).issues.map(
      (i) => `${i.path.join('.')} ${i.code} ${i.message}`,
    )

  test('defaults are what Node was set to before; headersTimeout follows a shorter requestTimeout', () => {
    const config = (text: string) => checkSource(parsePolicyText(text, 'c.yaml', {})).config?.clients
    expect(config('rules: []\n')).toEqual({
      headersTimeoutMs: 66_000,
      requestTimeoutMs: 300_000,
      keepAliveTimeoutMs: 65_000,
      maxBodySize: undefined,
      websocketIdleTimeoutMs: 3_600_000,
    })
    expect(
      config('clients: { requestTimeout: 30s, maxBodySize: 10MB, websocketIdleTimeout: 10m }\nrules: []\n'),
    ).toEqual({
      headersTimeoutMs: 30_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 65_000,
      maxBodySize: 10 * 1024 * 1024,
      websocketIdleTimeoutMs: 600_000,
    })
    expect(config('clients: { maxBodySize: 2048 }\nrules: []\n')?.maxBodySize).toBe(2048)
  })

  test.each([
    [
      '{ headerTimeout: 1s }',
      'clients.headerTimeout ERR_UNKNOWN_FIELD unknown field "headerTimeout" (did you mean "headersTimeout"?); expected one of headersTimeout, requestTimeout, keepAliveTimeout, maxBodySize, websocketIdleTimeout',
    ],
    [
      '{ keepAliveTimeout: 5 sec }',
      'clients.keepAliveTimeout ERR_DURATION expected a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to 31622400000, got "5 sec" (string)',
    ],
    [
      '{ headersTimeout: 2m, requestTimeout: 1m }',
      'clients.headersTimeout ERR_RANGE expected at most requestTimeout (1m): the headers are part of the request, got "2m" (string)',
    ],
    [
      '{ headersTimeout: 10m }',
      'clients.headersTimeout ERR_RANGE expected at most requestTimeout (300s): the headers are part of the request, got "10m" (string)',
    ],
    [
      '{ keepAliveTimeout: 30d }',
      `clients.keepAliveTimeout ERR_RANGE expected at most 24d (Node's timer limit), got "30d" (string)`,
    ],
    [
      '{ websocketIdleTimeout: 25d }',
      `clients.websocketIdleTimeout ERR_RANGE expected at most 24d (Node's timer limit), got "25d" (string)`,
    ],
    [
      '{ websocketIdleTimeout: 0 }',
      'clients.websocketIdleTimeout ERR_DURATION expected a duration like "60s" (ms, s, m, h, d) or whole milliseconds from 1 to 31622400000, got 0 (number)',
    ],
    [
      '{ maxBodySize: 10 mb }',
      'clients.maxBodySize ERR_SIZE expected a size like "10mb" (b, kb, mb, gb; 1kb = 1024 bytes) or whole bytes from 1, got "10 mb" (string)',
    ],
    [
      '{ maxBodySize: 1.5mb }',
      'clients.maxBodySize ERR_SIZE expected a size like "10mb" (b, kb, mb, gb; 1kb = 1024 bytes) or whole bytes from 1, got "1.5mb" (string)',
    ],
    [
      '{ maxBodySize: 0 }',
      'clients.maxBodySize ERR_SIZE expected a size like "10mb" (b, kb, mb, gb; 1kb = 1024 bytes) or whole bytes from 1, got 0 (number)',
    ],
    // Well formed, but past the bytes a number counts exactly.
    [
      '{ maxBodySize: 8388608gb }',
      'clients.maxBodySize ERR_RANGE expected at most 9007199254740991 bytes (2^53 - 1; 8388607gb), got "8388608gb" (string)',
    ],
    [
      '{ maxBodySize: 99999999999999999999b }',
      'clients.maxBodySize ERR_RANGE expected at most 9007199254740991 bytes (2^53 - 1; 8388607gb), got "99999999999999999999b" (string)',
    ],
    [
      '{ maxBodySize: 9007199254740992 }',
      'clients.maxBodySize ERR_RANGE expected at most 9007199254740991 bytes (2^53 - 1; 8388607gb), got 9007199254740992 (number)',
    ],
    ['60s', 'clients ERR_OBJECT expected a mapping (key: value lines), got "60s" (string)'],
  ])('clients: %s is refused', (clients, issue) => {
    expect(issues(clients)).toEqual([issue])
  })

  test('edgelimit check reports them with file, line and path', async () => {
    const file = writePolicy(
      tempDir(),
      'clients:\n  headersTimeout: 5m\n  requestTimeout: 1m\n  maxBodySize: lots\nrules: []\n',
    )
    const result = await runCli(['check', file])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(':2:19  clients.headersTimeout: expected at most requestTimeout (1m)')
    expect(result.stderr).toContain(':4:16  clients.maxBodySize: expected a size like "10mb"')
    expect(result.stderr).toContain(': 2 problems')
  })
})

describe('reload', () => {
  test('new timeouts apply to the connections already open and to new ones; an idle connection keeps the keep-alive timeout it was given', async () => {
    const gw = await gateway('rules: []\n')
    // Idle before the reload: armed with the 65 s keep-alive timeout.
    const before = open(gw)
    before.socket.write('GET /before HTTP/1.1\r\nhost: a\r\n\r\n')
    await before.until((t) => t.includes('got 0'))
    // Started before the reload, its headers never finished.
    const slow = open(gw)
    slow.socket.write('GET /slow HTTP/1.1\r\nhost: a\r\n')

    writeFileSync(gw.file, 'clients: { headersTimeout: 1s, keepAliveTimeout: 1s }\nrules: []\n')
    expect(await gw.gateway.reload()).toMatchObject({ ok: true })
    const after = open(gw)
    after.socket.write('GET /after HTTP/1.1\r\nhost: a\r\n\r\n')
    await after.until((t) => t.includes('got 0'))
    await after.until()
    expect(after.closedAfter).toBeLessThan(10_000)
    expect(await slow.until()).toMatch(/^HTTP\/1\.1 408 /)
    expect(slow.closedAfter).toBeLessThan(10_000)
    expect(before.closedAfter).toBeUndefined()
    before.socket.destroy()
  })

  test('maxBodySize applies to requests after the reload; a reload with invalid limits is rejected and the old ones stay', async () => {
    const gw = await gateway('rules: []\n')
    const body = 'x'.repeat(2048)
    expect((await fetch(`${gw.url}/a`, { method: 'POST', body })).status).toBe(200)

    writeFileSync(gw.file, 'clients: { maxBodySize: 1kb }\nrules: []\n')
    expect(await gw.gateway.reload()).toMatchObject({ ok: true })
    expect(await declared(gw, '/b', 2048)).toBe('HTTP/1.1 413 Payload Too Large')

    writeFileSync(gw.file, 'clients: { maxBodySize: 1kb, headersTimeout: 1h }\nrules: []\n')
    const rejected = await gw.gateway.reload()
    expect(rejected.ok).toBe(false)
    expect(rejected.issues.map((i) => `${i.path.join('.')} ${i.code}`)).toEqual([
      'clients.headersTimeout ERR_RANGE',
    ])
    expect(gw.logs.some((l) => l.msg.startsWith('policy rejected (1 problem)'))).toBe(true)
    expect(await declared(gw, '/c', 1025)).toBe('HTTP/1.1 413 Payload Too Large')
    expect(seen.map((s) => s.url)).toEqual(['/a'])
  })
})
