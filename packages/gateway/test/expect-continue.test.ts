// `Expect: 100-continue` over a raw socket: the rules decide before the client is invited to send
// its body, so a denied upload is refused without reading it, and an admitted one still arrives.
import { createHash, randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type InProcess, socketReader, startInProcess } from './support/gateway.js'
import { type Echo, type Origin, startOrigin } from './support/origin.js'

let origin: Origin
let gw: InProcess

beforeAll(async () => {
  origin = await startOrigin()
  // One request a day to /deny, spent here: every later request there is denied.
  gw = await startInProcess(
    'rules: [{ name: deny, match: { path: /deny/** }, algorithm: token-bucket, capacity: 1, refillRate: 1, refillInterval: 1d }]\n',
    { upstream: origin.url },
  )
  const spent = await fetch(`${gw.url}/deny/spend`)
  await spent.arrayBuffer()
  if (spent.status !== 200) throw new Error(`expected the one request of /deny to pass, got ${spent.status}`)
})
afterAll(async () => {
  await gw?.close()
  await origin?.close()
})

/** The body of a raw HTTP/1.1 answer, chunked or not. */
function bodyOf(answer: string): string {
  const head = answer.slice(0, answer.indexOf('\r\n\r\n'))
  let rest = answer.slice(head.length + 4)
  if (!/\r\ntransfer-encoding: chunked/i.test(head)) return rest
  let body = ''
  for (;;) {
    const eol = rest.indexOf('\r\n')
    const size = Number.parseInt(rest.slice(0, eol), 16)
    if (size === 0) return body
    body += rest.slice(eol + 2, eol + 2 + size)
    rest = rest.slice(eol + 2 + size + 2)
  }
}

describe('Expect: 100-continue', () => {
  test('a denied request gets its 429 with Connection: close, no 100 Continue, and its body is never read', async () => {
    const before = origin.requests
    const socket = connect(gw.gateway.port, '127.0.0.1')
    const answer = socketReader(socket)
    socket.write(
      'POST /deny/upload HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 20971520\r\n\r\n',
    )
    // The first answer must be the final one, not an invitation to send 20 MiB.
    const first = await answer.until((text) => text.includes('\r\n\r\n'))
    expect(first).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/)
    // The client sends nothing more: the gateway must finish and close on its own.
    const text = await answer.until()
    expect(answer.closed).toBe(true)
    expect(text).not.toContain('100 Continue')
    expect(text).toMatch(/\r\nconnection: close\r\n/i)
    expect(text).toContain('application/problem+json')
    expect(origin.requests).toBe(before)
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
    expect(metrics).toContain('edgelimit_responses_total{code="429"} 1')
  })

  test('an admitted request gets 100 Continue, then its body reaches the upstream intact (without Expect)', async () => {
    const body = randomBytes(256 * 1024)
    const socket = connect(gw.gateway.port, '127.0.0.1')
    const answer = socketReader(socket)
    socket.write(
      `POST /upload-check HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`,
    )
    const interim = await answer.until((text) => text.includes('\r\n\r\n'))
    expect(interim).toBe('HTTP/1.1 100 Continue\r\n\r\n')
    socket.write(body)
    const text = await answer.until()
    expect(answer.closed).toBe(true)
    const final = text.slice(interim.length)
    expect(final).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    const seen = JSON.parse(bodyOf(final)) as Echo
    expect(seen.bytes).toBe(body.length)
    expect(seen.sha256).toBe(createHash('sha256').update(body).digest('hex'))
    // The gateway answered the expectation itself; the upstream gets the body without one.
    expect(seen.headers.expect).toBeUndefined()
  })

  test('any other expectation gets a 417 problem with Connection: close, counted, never forwarded', async () => {
    const before = origin.requests
    const socket = connect(gw.gateway.port, '127.0.0.1')
    const answer = socketReader(socket)
    socket.write('POST /other HTTP/1.1\r\nhost: a\r\nexpect: something-else\r\ncontent-length: 2\r\n\r\nhi')
    // Node's own 417 has an empty chunked body and keeps the connection.
    const text = await answer.until((t) => t.endsWith('}') || t.endsWith('\r\n0\r\n\r\n'))
    expect(text).toMatch(/^HTTP\/1\.1 417 Expectation Failed\r\n/)
    expect(text).toMatch(/\r\nconnection: close\r\n/i)
    await answer.until()
    expect(text).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i)
    const problem = JSON.parse(bodyOf(text)) as Record<string, unknown>
    expect(problem).toMatchObject({ status: 417, title: 'Expectation Failed', instance: '/other' })
    expect(String(problem.detail)).toContain('100-continue')
    expect(origin.requests).toBe(before)
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
    expect(metrics).toContain('edgelimit_responses_total{code="417"} 1')
  })
})
