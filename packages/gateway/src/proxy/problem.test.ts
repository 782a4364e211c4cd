import { PassThrough } from 'node:stream'
import { describe, expect, test } from 'vitest'
import { answerClientError } from './problem.js'

/**
 * A connection as the 'clientError' handler gets it; `inFlight`: the response Node has on it, and
 * whether its request was read to the end (else the error is about that request's body).
 */
function connection(inFlight?: { headersSent: boolean; req: { complete: boolean } }) {
  const socket = new PassThrough()
  let written = ''
  socket.on('data', (chunk: Buffer) => {
    written += chunk.toString('latin1')
  })
  if (inFlight !== undefined) Object.assign(socket, { _httpMessage: inFlight })
  return { socket, written: () => written }
}

const parserError = (code: string) => Object.assign(new Error(`Parse Error: ${code}`), { code })

/** The statuses `answerClientError` counted for a connection's error. */
function counted(error: Error, socket: PassThrough): number[] {
  const statuses: number[] = []
  answerClientError(error, socket, (status) => statuses.push(status))
  return statuses
}

describe('answerClientError: what it answers, and what it counts for the metrics', () => {
  test('a refused request is answered and its status returned: 400, 431, 408', () => {
    for (const [code, status] of [
      ['HPE_INVALID_URL', 400],
      ['HPE_HEADER_OVERFLOW', 431],
      ['ERR_HTTP_REQUEST_TIMEOUT', 408],
    ] as const) {
      const c = connection()
      expect(counted(parserError(code), c.socket)).toEqual([status])
      expect(c.written()).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
    }
  })

  test('nothing answered, nothing to count: a reset, a peer gone, a response already begun or complete', () => {
    const reset = connection()
    expect(counted(parserError('ECONNRESET'), reset.socket)).toEqual([])
    const gone = connection()
    gone.socket.end()
    expect(counted(parserError('HPE_INVALID_EOF_STATE'), gone.socket)).toEqual([])
    const begun = connection({ headersSent: true, req: { complete: false } })
    expect(counted(parserError('ERR_HTTP_REQUEST_TIMEOUT'), begun.socket)).toEqual([])
    // Its answer complete (a 429 kept alive), the request's body still being read when the client ends.
    const answered = connection()
    Object.assign(answered.socket, { parser: { incoming: { complete: false } } })
    expect(counted(parserError('HPE_INVALID_EOF_STATE'), answered.socket)).toEqual([])
    expect([reset, gone, begun, answered].map((c) => [c.written(), c.socket.destroyed])).toEqual([
      ['', true],
      ['', true],
      ['', true],
      ['', true],
    ])
  })

  test('a request in the handler (its body timed out) is answered 408, but counted by the handler', () => {
    const c = connection({ headersSent: false, req: { complete: false } })
    expect(counted(parserError('ERR_HTTP_REQUEST_TIMEOUT'), c.socket)).toEqual([])
    expect(c.written()).toMatch(/^HTTP\/1\.1 408 /)
  })

  test('a request refused behind one read to its end is answered, and counted, when its turn comes', () => {
    for (const headersSent of [false, true]) {
      const c = connection({ headersSent, req: { complete: true } })
      const statuses: number[] = []
      let turn: (() => void) | undefined
      const error = parserError('HPE_INVALID_HEADER_TOKEN')
      answerClientError(
        error,
        c.socket,
        (s) => statuses.push(s),
        (_, next) => {
          turn = next
        },
      )
      // More bytes after the refused ones fail the parser again: still one answer.
      answerClientError(
        error,
        c.socket,
        (s) => statuses.push(s),
        () => {
          throw new Error('queued twice')
        },
      )
      expect([c.written(), statuses]).toEqual(['', []])
      turn?.()
      expect(c.written()).toMatch(/^HTTP\/1\.1 400 /)
      expect(statuses).toEqual([400])
    }
  })
})
