import { createServer, type IncomingMessage } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { describe, expect, test } from 'vitest'
import { requestHeaders } from './headers.js'

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
