// Bodiless upstream answers (204, 304) relayed intact, and answers the gateway has to cut short
// counted as such. The upstream is a raw socket server, so it can send what Node's would not.
import { connect, createServer, type Server, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type InProcess, startInProcess } from './support/gateway.js'

// What the upstream sends for each path: RFC 9110 §8.6 lets a 304 carry the Content-Length of
// the representation (Node's own server sends it); a 204 must not have one, but some send it.
const ANSWERS: Readonly<Record<string, string>> = {
  '/304': 'HTTP/1.1 304 Not Modified\r\netag: "v1"\r\ncontent-length: 1234\r\n\r\n',
  '/204': 'HTTP/1.1 204 No Content\r\nx-kept: yes\r\ncontent-length: 5\r\n\r\n',
  '/ok': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
}

let upstream: Server
let gw: InProcess

beforeAll(async () => {
  upstream = createServer((socket) => {
    let buffer = ''
    socket.on('error', () => {})
    socket.on('data', (data) => {
      buffer += data.toString('latin1')
      for (let end = buffer.indexOf('\r\n\r\n'); end >= 0; end = buffer.indexOf('\r\n\r\n')) {
        const path = buffer.slice(0, end).split(' ')[1] ?? '/'
        buffer = buffer.slice(end + 4)
        if (path === '/cut') {
          socket.end('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly-part')
          return
        }
        if (path === '/head-only') {
          socket.end('HTTP/1.1 200 OK\r\nx-head: sent\r\ncontent-length: 10\r\n\r\n')
          return
        }
        socket.write(ANSWERS[path] ?? 'HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n')
      }
    })
  })
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  const { port } = upstream.address() as { port: number }
  gw = await startInProcess('rules: []\n', { upstream: `http://127.0.0.1:${port}` })
})
afterAll(async () => {
  await gw?.close()
  await new Promise((resolve) => upstream?.close(resolve))
})

/** Reads from `socket` until `done(text)` holds, or the socket closes. */
function readUntil(
  socket: Socket,
  done: (text: string) => boolean,
): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    let text = ''
    const finish = (closed: boolean) => {
      socket.off('data', onData)
      socket.off('close', onClose)
      resolve({ text, closed })
    }
    const onData = (data: Buffer) => {
      text += data.toString('latin1')
      if (done(text)) finish(false)
    }
    const onClose = () => finish(true)
    socket.on('data', onData)
    socket.on('close', onClose)
  })
}

async function metricsText(): Promise<string> {
  return (await fetch(`${gw.admin}/metrics`)).text()
}

describe('bodiless answers with a Content-Length', () => {
  test('a 304 and a 204 reach the client whole, and the connection serves the next request', async () => {
    const socket = connect(gw.gateway.port, '127.0.0.1')
    socket.on('error', () => {})
    try {
      const head = (text: string) => text.includes('\r\n\r\n')
      socket.write('GET /304 HTTP/1.1\r\nhost: a\r\nif-none-match: "v1"\r\n\r\n')
      const notModified = await readUntil(socket, head)
      expect(notModified.closed).toBe(false)
      expect(notModified.text).toMatch(/^HTTP\/1\.1 304 Not Modified\r\n/)
      expect(notModified.text).toMatch(/\r\netag: "v1"\r\n/i)
      // Kept, as RFC 9110 §8.6 allows and nginx does: it tells the size of the cached representation.
      expect(notModified.text).toMatch(/\r\ncontent-length: 1234\r\n/i)

      socket.write('GET /204 HTTP/1.1\r\nhost: a\r\n\r\n')
      const noContent = await readUntil(socket, head)
      expect(noContent.closed).toBe(false)
      expect(noContent.text).toMatch(/^HTTP\/1\.1 204 No Content\r\n/)
      expect(noContent.text).toMatch(/\r\nx-kept: yes\r\n/i)
      // RFC 9110 §8.6: a 204 has no Content-Length.
      expect(noContent.text).not.toMatch(/content-length/i)

      socket.write('GET /ok HTTP/1.1\r\nhost: a\r\n\r\n')
      const next = await readUntil(socket, (text) => text.endsWith('\r\n\r\nok'))
      expect(next.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    } finally {
      socket.destroy()
    }
    const metrics = await metricsText()
    expect(metrics).toContain('edgelimit_responses_total{code="304"} 1')
    expect(metrics).toContain('edgelimit_upstream_responses_total{code="304"} 1')
    expect(metrics).toContain('edgelimit_responses_total{code="204"} 1')
    expect(metrics).toContain('edgelimit_upstream_responses_total{code="204"} 1')
    expect(metrics).not.toContain('code="error"')
  })

  test('an answer the gateway has to cut short is counted as aborted, not as its status', async () => {
    const socket = connect(gw.gateway.port, '127.0.0.1')
    socket.on('error', () => {})
    socket.write('GET /cut HTTP/1.1\r\nhost: a\r\n\r\n')
    const cut = await readUntil(socket, () => false)
    expect(cut.closed).toBe(true)
    expect(cut.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*only-part$/)
    const metrics = await metricsText()
    expect(metrics).toContain('edgelimit_responses_total{code="aborted"} 1')
    expect(metrics).toContain('edgelimit_upstream_responses_total{code="error"} 1')
    expect(metrics).toContain('edgelimit_responses_total{code="200"} 1') // the /ok above, not this one
    expect(metrics).toContain('edgelimit_in_flight_requests 0')
  })

  test('an upstream that closes after its head, before any body byte: the client gets that head, cut off', async () => {
    const count = (text: string, line: string) =>
      Number(new RegExp(`^${line} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
    const aborted = 'edgelimit_responses_total\\{code="aborted"\\}'
    const before = count(await metricsText(), aborted)
    const socket = connect(gw.gateway.port, '127.0.0.1')
    socket.on('error', () => {})
    socket.write('GET /head-only HTTP/1.1\r\nhost: a\r\n\r\n')
    const cut = await readUntil(socket, () => false)
    expect(cut.closed).toBe(true)
    // Not an empty reply: the head (its Content-Length unmet) tells the client the answer was cut.
    expect(cut.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*x-head: sent\r\n[\s\S]*\r\n\r\n$/)
    expect(cut.text).toMatch(/\r\ncontent-length: 10\r\n/i)
    const metrics = await metricsText()
    expect(count(metrics, aborted)).toBe(before + 1)
    expect(metrics).toContain('edgelimit_in_flight_requests 0')
  })
})
