import { createServer, type IncomingMessage } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { describe, expect, test, vi } from 'vitest'
import { fromIncoming } from '../policy/request.js'
import { connectionTokens, requestHeaders, responseTrailers } from './headers.js'

/**
 * Sends `lines` (raw header lines, `Name: value`) to a Node server and runs `inspect` on the request
 * Node parsed, in its 'request' handler.
 */
async function parsed<T>(lines: readonly string[], inspect: (req: IncomingMessage) => T): Promise<T> {
  let result: { value: T } | undefined
  const server = createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    result = { value: inspect(req) }
    res.end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  try {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
    await new Promise<void>((resolve, reject) => {
      socket.once('data', () => resolve())
      socket.once('error', reject)
      socket.write(`GET / HTTP/1.1\r\nHost: a\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`)
    })
    socket.destroy()
  } finally {
    server.close()
  }
  if (result === undefined) throw new Error('no request')
  return result.value
}

/** `req.rawHeaders` made to count how often its lines are read. */
function countingReads(req: IncomingMessage): () => number {
  let reads = 0
  const raw = req.rawHeaders
  req.rawHeaders = new Proxy(raw, {
    get(target, key, receiver) {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads++
      return Reflect.get(target, key, receiver)
    },
  })
  return () => reads
}

describe('requestHeaders', () => {
  test('reads each raw header line a bounded number of times, however many fields are repeated', async () => {
    // 400 names, each on two lines, and a single-value field Node keeps the first of, repeated (900
    // lines: Node's request keeps 1,000).
    const names = Array.from({ length: 400 }, (_, i) => `x-h${i}`)
    const lines = [
      ...names.flatMap((n) => [`${n}: 1`, `${n}: 2`]),
      ...Array.from({ length: 100 }, (_, i) => `User-Agent: ua${i}`),
    ]
    const { reads, total, out } = await parsed(lines, (req) => {
      void req.headers
      const reads = countingReads(req)
      const out = requestHeaders(req, false, false)
      return { reads: reads(), total: req.rawHeaders.length, out }
    })
    // Each line is read once (its name and its value): linear, where rescanning the lines before
    // every repeated one reads about (lines)² / 2.
    expect(reads).toBeLessThanOrEqual(total)
    const sent = out.filter((_, i) => i % 2 === 0)
    expect(sent.filter((n) => n === 'x-h7')).toEqual(['x-h7'])
    expect(out[out.indexOf('x-h7') + 1]).toBe('1, 2')
    expect(out[out.indexOf('User-Agent') + 1]).toBe('ua0')
    expect(sent.filter((n) => n === 'User-Agent')).toHaveLength(1)
    expect(sent).toHaveLength(400 + 1 + 3)
  })
})

describe('a single-value field sent on several lines', () => {
  const lines = [
    'Range: bytes=0-1',
    'X-Other: a',
    'range: bytes=5-6',
    'Date: Tue, 15 Nov 1994 08:12:31 GMT',
    'Date: Wed, 16 Nov 1994 08:12:31 GMT',
    'If-Range: "v1"',
    'If-Range: "v2"',
    'Origin: https://a.example',
    'Origin: https://b.example',
    'Authorization: Bearer one',
    'Authorization: Bearer two',
    'X-Other: b',
  ]
  const FIRST = {
    range: 'bytes=0-1',
    date: 'Tue, 15 Nov 1994 08:12:31 GMT',
    'if-range': '"v1"',
    origin: 'https://a.example',
    authorization: 'Bearer one',
  }

  test('reaches the upstream as its first line, and the rules read that line, even where Node joins them', async () => {
    const { out, read } = await parsed(lines, (req) => {
      const info = fromIncoming(req)
      return {
        out: requestHeaders(req, false, false),
        read: Object.fromEntries(Object.keys(FIRST).map((name) => [name, info.header(name)])),
      }
    })
    const sent = (lower: string) =>
      out.flatMap((h, i) => (i % 2 === 0 && h.toLowerCase() === lower ? [out[i + 1]] : []))
    for (const [name, first] of Object.entries(FIRST)) expect(sent(name), name).toEqual([first])
    expect(read).toEqual(FIRST)
    // A list field is joined (RFC 9110 §5.3), for both.
    expect(sent('x-other')).toEqual(['a, b'])
  })

  test('on one line, with a comma of its own, is read and sent as it is', async () => {
    const { out, range } = await parsed(['Range: bytes=0-1,5-6'], (req) => ({
      out: requestHeaders(req, false, false),
      range: fromIncoming(req).header('range'),
    }))
    expect(range).toBe('bytes=0-1,5-6')
    expect(out[out.indexOf('Range') + 1]).toBe('bytes=0-1,5-6')
  })
})

test('connectionTokens: the usual Connection values, in any case, name no header and cost no allocation', () => {
  const split = vi.spyOn(String.prototype, 'split')
  try {
    for (const value of ['keep-alive', 'Keep-Alive', 'KEEP-ALIVE', 'close', 'Close']) {
      expect(connectionTokens(value), value).toBeUndefined()
    }
    expect(split).not.toHaveBeenCalled()
  } finally {
    split.mockRestore()
  }
  expect(connectionTokens('Keep-Alive, X-Key')).toEqual(new Set(['x-key']))
  expect(connectionTokens(['close', 'Upgrade'])).toEqual(new Set(['upgrade']))
})

describe('responseTrailers', () => {
  test.each([
    [{ 'x-checksum': 'abc' }, [['x-checksum', 'abc']]],
    // Each line of a repeated field; a value Node would refuse (beyond Latin-1) is dropped.
    [
      { 'server-timing': ['db;dur=53', 'app;dur=47'] },
      [
        ['server-timing', 'db;dur=53'],
        ['server-timing', 'app;dur=47'],
      ],
    ],
    [{ 'x-name': 'caf\u00e9', 'x-wide': '\u20ac' }, [['x-name', 'caf\u00e9']]],
    // Hop-by-hop fields, and those that say how to frame or read the content, are not relayed.
    [{ connection: 'close', 'transfer-encoding': 'chunked', trailer: 'x', 'content-length': '3' }, []],
    [
      { 'content-type': 'text/html', 'content-encoding': 'gzip', 'content-range': 'bytes 0-1/2', host: 'a' },
      [],
    ],
  ])('%o → %o', (trailers, expected) => {
    expect(responseTrailers(trailers)).toEqual(expected)
  })
})
