import { createServer, type IncomingMessage, type Server } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterEach, describe, expect, test } from 'vitest'
import { type LingerLimits, lingerOnClose } from './lingering-close.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

const servers: Server[] = []
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections()
    s.close()
  }
})

/**
 * A server that refuses every request at once with `Connection: close`, its body unread, and a
 * client on it that keeps its own side open: what the client got, when the server's answer
 * ended (its FIN) and when the server closed the connection (ms since the connection began).
 */
async function refused(limits: LingerLimits, head: string) {
  const server = createServer((_req, res) => {
    res.writeHead(413, { connection: 'close', 'content-length': '2' })
    res.end('no')
  })
  server.prependListener('request', (req) => lingerOnClose(req, limits))
  servers.push(server)
  const started = performance.now()
  const closed = new Promise<number>((r) =>
    server.once('connection', (s: Socket) => s.once('close', () => r(performance.now() - started))),
  )
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const socket = connect({
    port: (server.address() as AddressInfo).port,
    host: '127.0.0.1',
    allowHalfOpen: true,
  })
  let text = ''
  socket.on('data', (d: Buffer) => {
    text += d.toString('latin1')
  })
  socket.on('error', () => {})
  socket.write(head)
  return {
    socket,
    get text() {
      return text
    },
    ended: new Promise<number>((r) => socket.once('end', () => r(performance.now() - started))),
    closed,
  }
}

const LIMITS = { totalMs: 300, idleMs: 100, maxBytes: 1024 * 1024 }
const HEAD = 'POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 1000000000\r\n\r\n'

describe('a connection closed with its request body unread', () => {
  test('is half-closed after the answer and read until the client closes its side', async () => {
    const c = await refused(LIMITS, HEAD)
    await c.ended
    expect(c.text).toMatch(/^HTTP\/1\.1 413 [\s\S]*\r\n\r\nno$/)
    // Still read: more body is taken in, not answered with a reset.
    const sent = await new Promise<Error | null | undefined>((r) =>
      c.socket.write(Buffer.alloc(64 * 1024), r),
    )
    expect(sent).toBeFalsy()
    const ended = performance.now()
    c.socket.end()
    await c.closed
    expect(performance.now() - ended).toBeLessThan(LIMITS.idleMs)
  })

  test('is closed after idleMs without a byte', async () => {
    const c = await refused(LIMITS, HEAD)
    const ended = await c.ended
    const closed = await c.closed
    expect(closed - ended).toBeGreaterThanOrEqual(LIMITS.idleMs - 10)
    expect(closed).toBeLessThan(LIMITS.totalMs)
  })

  test('is closed after totalMs however steadily the client sends', async () => {
    const c = await refused(LIMITS, HEAD)
    const drip = setInterval(() => c.socket.write('x'), 20)
    try {
      expect(await c.closed).toBeGreaterThanOrEqual(LIMITS.totalMs - 10)
    } finally {
      clearInterval(drip)
    }
  })

  test('is closed once it has read maxBytes', async () => {
    const c = await refused({ ...LIMITS, totalMs: 60_000, idleMs: 60_000 }, HEAD)
    await c.ended
    const chunk = Buffer.alloc(64 * 1024)
    const pump = () => {
      while (!c.socket.destroyed && c.socket.write(chunk)) {}
    }
    c.socket.on('drain', pump)
    pump()
    await c.closed
    expect(c.socket.bytesWritten).toBeGreaterThan(LIMITS.maxBytes)
    c.socket.destroy()
  })
})

test('a connection whose request was read whole closes at once, as Node closes it', async () => {
  const c = await refused(LIMITS, 'POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\nhi')
  const ended = await c.ended
  expect((await c.closed) - ended).toBeLessThan(LIMITS.idleMs / 2)
  c.socket.destroy()
})

test('an idle keep-alive connection does not keep its last request alive', async () => {
  let last: WeakRef<IncomingMessage> | undefined
  const server = createServer((req, res) => {
    last = new WeakRef(req)
    res.end('ok')
  })
  server.prependListener('request', (req) => lingerOnClose(req, LIMITS))
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
  try {
    await new Promise((r) => {
      socket.once('data', r)
      socket.write('GET / HTTP/1.1\r\nhost: a\r\n\r\n')
    })
    // Node lets go of a request once it has ended, which takes it a few turns after the answer;
    // a WeakRef's target lives until the job that read it ends: collect on later tasks.
    for (let i = 0; i < 20 && last?.deref() !== undefined; i++) {
      await new Promise((r) => setImmediate(r))
      gc()
    }
    expect(last).toBeDefined()
    expect(last?.deref()).toBeUndefined()
  } finally {
    socket.destroy()
  }
})
