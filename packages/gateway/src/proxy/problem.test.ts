import { PassThrough } from 'node:stream'
import { describe, expect, test } from 'vitest'
import { answerClientError } from './problem.js'

/** A connection as the 'clientError' handler gets it; `inFlight`: the response Node has on it. */
function connection(inFlight?: { headersSent: boolean }) {
  const socket = new PassThrough()
  let written = ''
  socket.on('data', (chunk: Buffer) => {
    written += chunk.toString('latin1')
  })
  if (inFlight !== undefined) Object.assign(socket, { _httpMessage: inFlight })
  return { socket, written: () => written }
}

const parserError = (code: string) => Object.assign(new Error(`Parse Error: ${code}`), { code })

describe('answerClientError: what it answers, and what the metrics should count', () => {
  test('a refused request is answered and its status returned: 400, 431, 408', () => {
    for (const [code, status] of [
      ['HPE_INVALID_URL', 400],
      ['HPE_HEADER_OVERFLOW', 431],
      ['ERR_HTTP_REQUEST_TIMEOUT', 408],
    ] as const) {
      const c = connection()
      expect(answerClientError(parserError(code), c.socket)).toBe(status)
      expect(c.written()).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
    }
  })

  test('nothing answered, nothing to count: a reset, a peer gone, a response already begun or complete', () => {
    const reset = connection()
    expect(answerClientError(parserError('ECONNRESET'), reset.socket)).toBeUndefined()
    const gone = connection()
    gone.socket.end()
    expect(answerClientError(parserError('HPE_INVALID_EOF_STATE'), gone.socket)).toBeUndefined()
    const begun = connection({ headersSent: true })
    expect(answerClientError(parserError('ERR_HTTP_REQUEST_TIMEOUT'), begun.socket)).toBeUndefined()
    // Its answer complete (a 429 kept alive), the request's body still being read when the client ends.
    const answered = connection()
    Object.assign(answered.socket, { parser: { incoming: { complete: false } } })
    expect(answerClientError(parserError('HPE_INVALID_EOF_STATE'), answered.socket)).toBeUndefined()
    expect([reset, gone, begun, answered].map((c) => [c.written(), c.socket.destroyed])).toEqual([
      ['', true],
      ['', true],
      ['', true],
      ['', true],
    ])
  })

  test('a request in the handler (its body timed out) is answered 408, but counted by the handler', () => {
    const c = connection({ headersSent: false })
    expect(answerClientError(parserError('ERR_HTTP_REQUEST_TIMEOUT'), c.socket)).toBeUndefined()
    expect(c.written()).toMatch(/^HTTP\/1\.1 408 /)
  })
})
