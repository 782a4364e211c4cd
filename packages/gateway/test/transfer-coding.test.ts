// A request body in a transfer coding other than chunked (RFC 9112 §6.1, §7): Node takes the
// chunked framing off and hands over what is inside, still in that coding. Passed on with its
// `Transfer-Encoding` dropped (a hop-by-hop field), the upstream would read gzip bytes as the body.
import { connect } from 'node:net'
import { gzipSync } from 'node:zlib'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type InProcess, socketReader, startInProcess } from './support/gateway.js'
import { type Echo, type Origin, startOrigin } from './support/origin.js'

let origin: Origin
let gw: InProcess

beforeAll(async () => {
  origin = await startOrigin()
  gw = await startInProcess('rules: [{ name: all, algorithm: fixed-window, limit: 100, window: 1m }]\n', {
    upstream: origin.url,
  })
})
afterAll(async () => {
  await gw?.close()
  await origin?.close()
})

/** Sends `head` and a chunked `body` on a raw socket; the whole answer once the gateway closes. */
async function send(codings: string, body: Buffer): Promise<string> {
  const socket = connect(gw.gateway.port, '127.0.0.1')
  const answer = socketReader(socket)
  socket.write(
    `POST /upload-echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: ${codings}\r\nconnection: close\r\n\r\n`,
  )
  socket.write(
    Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]),
  )
  return answer.until()
}

const bodyOf = (answer: string) => answer.slice(answer.indexOf('\r\n\r\n') + 4)

test('a body in a coding the gateway does not decode gets a 501 problem before any rule, closed, counted and never forwarded (as nginx does)', async () => {
  const before = origin.requests
  for (const codings of ['gzip, chunked', 'identity, chunked', 'x-custom, chunked']) {
    const text = await send(codings, gzipSync('hello world'))
    expect(text, codings).toMatch(/^HTTP\/1\.1 501 Not Implemented\r\n/)
    expect(text).toMatch(/\r\nconnection: close\r\n/i)
    expect(text).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i)
    // Refused before any rule, as a 413 or 417 is: nothing charged, no rate-limit fields.
    expect(text).not.toMatch(/\r\nratelimit/i)
    const problem = JSON.parse(bodyOf(text)) as Record<string, unknown>
    expect(problem).toMatchObject({ status: 501, title: 'Not Implemented', instance: '/upload-echo' })
    expect(String(problem.detail)).toBe(
      `The request's body is in a transfer coding the gateway does not decode (Transfer-Encoding: ${codings}): only chunked is.`,
    )
  }
  expect(origin.requests).toBe(before)
  const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
  expect(metrics).toContain('edgelimit_responses_total{code="501"} 3')
})

test('chunked alone, in any case, is forwarded with its body whole', async () => {
  const body = Buffer.from('hello world')
  for (const codings of ['chunked', 'Chunked']) {
    const text = await send(codings, body)
    expect(text, codings).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    const echo = JSON.parse(bodyOf(text).replace(/^[\da-f]+\r\n|\r\n0\r\n\r\n$/g, '')) as Echo
    expect(echo).toMatchObject({ method: 'POST', bytes: body.length })
  }
})
