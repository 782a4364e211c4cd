// WebSocket upgrades through the gateway, with the real `ws` on both ends: decided by the rules
// before anything reaches the upstream, then tunnelled byte for byte; other upgrades (h2c) stay
// ordinary requests.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { manualClock } from 'edgelimit/testing'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { TUNNEL_CLOSE_GRACE_MS } from '../src/proxy/tunnel.js'
import {
  type InProcess,
  rawRequest,
  type SocketReader,
  socketReader,
  startInProcess,
} from './support/gateway.js'

/**
 * An upstream that echoes WebSocket messages (`echo: <text>`, after a `hello` of its own), and
 * answers `/refuse` handshakes with a 403 and plain requests with JSON of what it got.
 */
interface Upstream {
  readonly url: string
  /** The handshakes that reached it (their headers), refused ones included. */
  readonly upgrades: IncomingHttpHeaders[]
  readonly requests: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[]
  readonly sockets: Set<WebSocket>
  /** Plain requests for `/hold…` are answered only once released, first come first answered. */
  readonly held: (() => void)[]
  /** Resolves with the next server-side WebSocket's close code. */
  readonly server: Server
  close(): Promise<void>
}

/**
 * A self-signed certificate for 127.0.0.1, made by `openssl` for this run (no key is kept in the
 * repository; the gateway is told not to check it).
 */
function selfSigned(): { key: string; cert: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'edgelimit-tls-'))
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    )
    return {
      key: readFileSync(path.join(dir, 'key.pem'), 'utf8'),
      cert: readFileSync(path.join(dir, 'cert.pem'), 'utf8'),
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function startUpstream(tls = false): Promise<Upstream> {
  const upgrades: IncomingHttpHeaders[] = []
  const requests: Upstream['requests'] = []
  const sockets = new Set<WebSocket>()
  const held: (() => void)[] = []
  const server = (tls ? createHttpsServer.bind(null, selfSigned()) : createServer)((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => {
      body += chunk
    })
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })
      res.setHeader('content-type', 'application/json')
      const answer = () =>
        res.end(JSON.stringify({ url: req.url, upgrade: req.headers.upgrade ?? null, body }))
      if (req.url?.startsWith('/hold')) held.push(answer)
      else answer()
    })
  })
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => [...protocols][0] ?? false,
  })
  server.on('upgrade', (req: IncomingMessage, socket, head) => {
    upgrades.push(req.headers)
    if (req.url === '/refuse') {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 7\r\n\r\nno way\n')
      return
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws)
      ws.on('close', () => sockets.delete(ws))
      ws.send('hello')
      ws.on('message', (data, binary) => ws.send(binary ? data : `echo: ${data.toString()}`, { binary }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`,
    upgrades,
    requests,
    sockets,
    held,
    server,
    async close() {
      for (const ws of sockets) ws.terminate()
      wss.close()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

/** A client that has had its handshake answered: the socket, and the messages it has received. */
interface Client {
  readonly ws: WebSocket
  readonly headers: IncomingHttpHeaders
  readonly messages: string[]
  next(): Promise<string>
  closed: Promise<{ code: number }>
}

/** Opens a WebSocket through the gateway and waits for its 101 (rejects on another answer). */
function open(
  url: string,
  options: { headers?: Record<string, string>; protocol?: string } = {},
): Promise<Client> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocol === undefined ? [] : [options.protocol], {
      headers: options.headers,
    })
    const messages: string[] = []
    const waiting: ((m: string) => void)[] = []
    ws.on('message', (data) => {
      const text = data.toString()
      const w = waiting.shift()
      if (w) w(text)
      else messages.push(text)
    })
    const closed = new Promise<{ code: number }>((r) => ws.on('close', (code) => r({ code })))
    ws.on('upgrade', (res: IncomingMessage) => {
      resolve({
        ws,
        headers: res.headers,
        messages,
        next: () => {
          const m = messages.shift()
          return m === undefined ? new Promise((r) => waiting.push(r)) : Promise.resolve(m)
        },
        closed,
      })
    })
    ws.on('unexpected-response', (_req, res: IncomingMessage) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
      })
      res.on('end', () => reject(Object.assign(new Error(`status ${res.statusCode}`), { res, body })))
    })
    ws.on('error', reject)
  })
}

/** What a refused handshake got: its response and body. */
async function refused(url: string): Promise<{ res: IncomingMessage; body: string }> {
  try {
    const client = await open(url)
    client.ws.terminate()
  } catch (error) {
    return error as { res: IncomingMessage; body: string }
  }
  throw new Error('the handshake was accepted')
}

const metricsOf = async (gw: InProcess) => (await fetch(`${gw.admin}/metrics`)).text()

/** Polls `check` until it holds (at most 3 s). */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 3000
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('condition not met within 3 s')
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** TCP sockets of this process, by `process.getActiveResourcesInfo`. */
const tcpSockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length

/** A WebSocket handshake as a client sends it (the key is RFC 6455's example). */
const handshake = (target: string) =>
  `GET ${target} HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`

/** The upgrade headers of an h2c request (its `Connection` line apart). */
const H2C = 'Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n'

/** Each response in `text`: its status line and the URL the upstream echoed (if any). */
const answered = (text: string) =>
  text.split(/(?=HTTP\/1\.1 \d{3} )/).map((a) => [a.slice(0, 15), /"url":"([^"]+)"/.exec(a)?.[1]])

/** A client frame (masked, with a zero key) carrying `text`. */
const frame = (text: string) =>
  Buffer.concat([Buffer.from([0x81, 0x80 | text.length, 0, 0, 0, 0]), Buffer.from(text)])

/** A bare TCP connection to `port`: what it has received (latin1) and whether it has closed. */
function rawClient(port: number): SocketReader {
  return socketReader(connect(port, '127.0.0.1'))
}

/** An upstream that takes TCP connections and records them; `answer` handles each one. */
async function rawUpstream(
  answer: (socket: Socket) => void,
): Promise<{ url: string; peers: Socket[]; close(): Promise<void> }> {
  const peers: Socket[] = []
  // Half-open allowed: an EOF from the gateway is not answered with one.
  const server = createNetServer({ allowHalfOpen: true }, (socket) => {
    peers.push(socket)
    socket.on('error', () => {})
    answer(socket)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    peers,
    async close() {
      for (const peer of peers) peer.destroy()
      await new Promise((r) => server.close(r))
    },
  }
}

let upstream: Upstream
let gw: InProcess

beforeAll(async () => {
  upstream = await startUpstream()
  gw = await startInProcess(
    `

rules:
  - name: sockets
    algorithm: fixed-window
    limit: 1000
    window: 1m
`,
    { upstream: upstream.url },
  )
})
afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

describe('an admitted upgrade', () => {
  test('is tunnelled: messages go both ways, the 101 carries the rate-limit fields, metrics count it', async () => {
    const client = await open(`${gw.url.replace('http', 'ws')}/chat`)
    expect(client.headers.ratelimit).toMatch(/^"sockets";r=\d+;t=\d+$/)
    expect(client.headers['ratelimit-policy']).toBe('"sockets";q=1000;w=60')
    expect(client.headers.upgrade).toBe('websocket')
    expect(await client.next()).toBe('hello')
    client.ws.send('ping')
    expect(await client.next()).toBe('echo: ping')
    const big = Buffer.alloc(256 * 1024, 7)
    client.ws.send(big, { binary: true })
    await until(() => client.messages.length === 1)
    expect(client.messages.shift()).toBe(big.toString())
    let metrics = await metricsOf(gw)
    expect(metrics).toMatch(/edgelimit_responses_total\{code="101"\} \d+/)
    expect(metrics).toMatch(/edgelimit_upstream_responses_total\{code="101"\} \d+/)
    expect(metrics).toContain('edgelimit_websocket_tunnels 1')
    expect(metrics).toContain('edgelimit_in_flight_requests 0')
    client.ws.close(1000)
    expect((await client.closed).code).toBe(1000)
    await until(async () => (await metricsOf(gw)).includes('edgelimit_websocket_tunnels 0'))
    metrics = await metricsOf(gw)
    expect(metrics).toContain('edgelimit_websocket_tunnels 0')
  })

  test('reaches the upstream with the headers an ordinary request gets, Upgrade and Sec-WebSocket-* kept', async () => {
    const before = upstream.upgrades.length
    const client = await open(`${gw.url.replace('http', 'ws')}/chat?room=1`, {
      protocol: 'chat.v2',
      headers: { 'x-forwarded-for': '203.0.113.9', 'x-real-ip': '203.0.113.9', 'x-app': 'kept' },
    })
    expect(client.ws.protocol).toBe('chat.v2')
    const seen = upstream.upgrades[before] as IncomingHttpHeaders
    // An untrusted peer's claims are dropped and the gateway sets its own, as for any request.
    expect(seen['x-forwarded-for']).toBe('127.0.0.1')
    expect(seen['x-real-ip']).toBeUndefined()
    expect(seen['x-forwarded-host']).toBe(`127.0.0.1:${gw.gateway.port}`)
    expect(seen['x-forwarded-proto']).toBe('http')
    expect(seen.host).toBe(new URL(upstream.url).host)
    expect(seen['x-app']).toBe('kept')
    expect(seen.upgrade).toBe('websocket')
    expect(seen.connection).toBe('Upgrade')
    expect(seen['sec-websocket-key']).toMatch(/^[A-Za-z0-9+/]{22}==$/)
    expect(seen['sec-websocket-version']).toBe('13')
    expect(seen['sec-websocket-protocol']).toBe('chat.v2')
    client.ws.close()
    await client.closed
  })

  test('a trusted proxy keeps its X-Forwarded-For, with the peer appended', async () => {
    const trusting = await startInProcess('identity: { trustedProxies: [127.0.0.1/32] }\nrules: []\n', {
      upstream: upstream.url,
    })
    try {
      const before = upstream.upgrades.length
      const client = await open(`${trusting.url.replace('http', 'ws')}/chat`, {
        headers: { 'x-forwarded-for': '203.0.113.9' },
      })
      expect(upstream.upgrades[before]?.['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1')
      client.ws.close()
      await client.closed
    } finally {
      await trusting.close()
    }
  })

  test('closing either side closes the other, and no socket is left open', async () => {
    const baseline = tcpSockets()
    const a = await open(`${gw.url.replace('http', 'ws')}/chat`)
    expect(await a.next()).toBe('hello')
    await until(() => upstream.sockets.size === 1)
    const [serverSide] = upstream.sockets
    const serverClosed = new Promise<number>((r) => serverSide?.on('close', (code) => r(code)))
    a.ws.close(4001, 'client leaves')
    expect(await serverClosed).toBe(4001)
    expect((await a.closed).code).toBe(4001)

    const b = await open(`${gw.url.replace('http', 'ws')}/chat`)
    expect(await b.next()).toBe('hello')
    await until(() => upstream.sockets.size === 1)
    for (const ws of upstream.sockets) ws.close(4002, 'upstream leaves')
    expect((await b.closed).code).toBe(4002)

    // Abrupt ends too: a client that vanishes takes the upstream's connection with it.
    const c = await open(`${gw.url.replace('http', 'ws')}/chat`)
    await until(() => upstream.sockets.size === 1)
    const [cServer] = upstream.sockets
    const cClosed = new Promise<number>((r) => cServer?.on('close', (code) => r(code)))
    c.ws.terminate()
    expect(await cClosed).toBe(1006)
    await until(() => tcpSockets() <= baseline && upstream.sockets.size === 0)
    await until(async () => (await metricsOf(gw)).includes('edgelimit_websocket_tunnels 0'))
  })

  test('an https upstream is reached over TLS', async () => {
    const secure = await startUpstream(true)
    // The gateway checks certificates like any client: this self-signed one is let through here.
    const saved = process.env.NODE_TLS_REJECT_UNAUTHORIZED
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0'
    const own = await startInProcess('rules: []\n', { upstream: secure.url })
    try {
      const client = await open(`${own.url.replace('http', 'ws')}/chat`)
      expect(await client.next()).toBe('hello')
      client.ws.send('over tls')
      expect(await client.next()).toBe('echo: over tls')
      expect(secure.upgrades[0]?.host).toBe(new URL(secure.url).host)
      client.ws.close()
      await client.closed
    } finally {
      if (saved === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED
      else process.env.NODE_TLS_REJECT_UNAUTHORIZED = saved
      await own.close()
      await secure.close()
    }
  })

  test('survives a reload: the tunnel started on the old policy stays open', async () => {
    const own = await startInProcess(
      'rules: [{ name: a, algorithm: fixed-window, limit: 10, window: 1m }]\n',
      {
        upstream: upstream.url,
      },
    )
    try {
      const client = await open(`${own.url.replace('http', 'ws')}/chat`)
      expect(await client.next()).toBe('hello')
      writeFileSync(own.file, 'rules: [{ name: b, algorithm: fixed-window, limit: 1, window: 1m }]\n')
      expect((await own.gateway.reload()).ok).toBe(true)
      expect(own.gateway.generation).toBe(2)
      client.ws.send('after reload')
      expect(await client.next()).toBe('echo: after reload')
      client.ws.close()
      await client.closed
    } finally {
      await own.close()
    }
  })
})

// `clients.websocketIdleTimeout`: a tunnel where neither side sends a byte for that long is closed
// (real time here: it is Node's socket timeout that is under test, so kept short).
describe('a quiet tunnel', () => {
  const IDLE = 200

  test('is closed, both sides, after websocketIdleTimeout without a byte either way', async () => {
    const own = await startInProcess(`clients: { websocketIdleTimeout: ${IDLE}ms }\nrules: []\n`, {
      upstream: upstream.url,
    })
    try {
      const client = await open(`${own.url.replace('http', 'ws')}/chat`)
      expect(await client.next()).toBe('hello')
      const quietSince = performance.now()
      await until(() => upstream.sockets.size === 1)
      const [serverSide] = upstream.sockets
      const serverClosed = new Promise<number>((r) => serverSide?.on('close', (code) => r(code)))
      expect((await client.closed).code).toBe(1006)
      expect(await serverClosed).toBe(1006)
      const quiet = performance.now() - quietSince
      expect(quiet).toBeGreaterThanOrEqual(IDLE - 20)
      expect(quiet).toBeLessThan(IDLE + 2_000)
      await until(async () => (await metricsOf(own)).includes('edgelimit_websocket_tunnels 0'))
    } finally {
      await own.close()
    }
  })

  test('one with traffic in either direction only stays open', async () => {
    const own = await startInProcess(`clients: { websocketIdleTimeout: ${IDLE}ms }\nrules: []\n`, {
      upstream: upstream.url,
    })
    try {
      const up = await open(`${own.url.replace('http', 'ws')}/chat`)
      expect(await up.next()).toBe('hello')
      await until(() => upstream.sockets.size === 1)
      const [serverSide] = upstream.sockets
      // Server to client only: the client never writes.
      for (let i = 0; i < 6; i++) {
        await new Promise((r) => setTimeout(r, IDLE / 2))
        serverSide?.send(`tick ${i}`)
        expect(await up.next()).toBe(`tick ${i}`)
      }
      expect(up.ws.readyState).toBe(WebSocket.OPEN)
      up.ws.close()
      await up.closed
    } finally {
      await own.close()
    }
  })

  test('a reload applies a new websocketIdleTimeout to open tunnels, counted from the reload', async () => {
    const own = await startInProcess('rules: []\n', { upstream: upstream.url })
    try {
      const client = await open(`${own.url.replace('http', 'ws')}/chat`)
      expect(await client.next()).toBe('hello')
      writeFileSync(own.file, `clients: { websocketIdleTimeout: ${IDLE}ms }\nrules: []\n`)
      expect((await own.gateway.reload()).ok).toBe(true)
      const reloaded = performance.now()
      expect((await client.closed).code).toBe(1006)
      expect(performance.now() - reloaded).toBeLessThan(IDLE + 2_000)
    } finally {
      await own.close()
    }
  })
})

describe('a tunnel one side half-closes', () => {
  test('the other side is ended, and both are closed after the grace when the peer stays half-open', async () => {
    // Answers 101 and echoes; an EOF from the gateway is never answered with one.
    const stubborn = await rawUpstream((socket) => {
      socket.once('data', () => {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')
        socket.on('data', (chunk) => socket.write(chunk))
      })
    })
    const own = await startInProcess('rules: []\n', { upstream: stubborn.url })
    try {
      const client = rawClient(own.gateway.port)
      client.socket.write(handshake('/chat'))
      await until(() => client.text.includes('\r\n\r\n'))
      expect(client.text).toMatch(/^HTTP\/1\.1 101 /)
      const [peer] = stubborn.peers
      const peerEnded = new Promise((r) => peer?.once('end', r))
      let peerClosed = false
      peer?.once('close', () => {
        peerClosed = true
      })
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
      try {
        client.socket.end()
        await peerEnded
        // Half-closed: the upstream may still answer, for the grace.
        expect(peerClosed).toBe(false)
        expect(await metricsOf(own)).toContain('edgelimit_websocket_tunnels 1')
        vi.advanceTimersByTime(TUNNEL_CLOSE_GRACE_MS)
      } finally {
        vi.useRealTimers()
      }
      await until(() => client.closed)
      await until(async () => (await metricsOf(own)).includes('edgelimit_websocket_tunnels 0'))
      // The gateway's side is gone: what the upstream still writes is refused (a reset).
      await until(() => {
        if (!peerClosed) peer?.write('late')
        return peerClosed
      })
    } finally {
      await own.close()
      await stubborn.close()
    }
  })
})

describe('a client that leaves during its handshake', () => {
  test('while the upstream has not answered: counted 499, and the upstream connection closes at once', async () => {
    let received = ''
    const silent = await rawUpstream((socket) =>
      socket.on('data', (chunk) => {
        received += chunk.toString('latin1')
      }),
    )
    const own = await startInProcess('rules: []\n', { upstream: silent.url })
    try {
      const client = rawClient(own.gateway.port)
      client.socket.write(handshake('/chat'))
      await until(() => received.endsWith('\r\n\r\n'))
      let upstreamClosed = false
      // The gateway closed its side (the peer, half-open allowed, keeps its own).
      silent.peers[0]?.once('end', () => {
        upstreamClosed = true
      })
      client.socket.end()
      await until(() => upstreamClosed)
      const metrics = await metricsOf(own)
      expect(metrics).toContain('edgelimit_responses_total{code="499"} 1')
      expect(metrics).toContain('edgelimit_in_flight_requests 0')
      expect(metrics).not.toContain('code="504"')
    } finally {
      await own.close()
      await silent.close()
    }
  })

  test('one that stays: what it sent meanwhile reaches the upstream after the 101, in order', async () => {
    let received = ''
    const late = await rawUpstream((socket) =>
      socket.on('data', (chunk) => {
        received += chunk.toString('latin1')
      }),
    )
    const own = await startInProcess('rules: []\n', { upstream: late.url })
    try {
      const client = rawClient(own.gateway.port)
      client.socket.write(`${handshake('/chat')}one`)
      await until(() => received.endsWith('\r\n\r\n'))
      client.socket.write('two')
      late.peers[0]?.write(
        'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      )
      await until(() => received.endsWith('\r\n\r\nonetwo'))
      client.socket.write('three')
      await until(() => received.endsWith('onetwothree'))
      expect(client.text).toMatch(/^HTTP\/1\.1 101 /)
      client.socket.destroy()
    } finally {
      await own.close()
      await late.close()
    }
  })

  test('while shaping holds it: counted 499 at once, the upstream never sees it', async () => {
    const shaping = await startInProcess(
      'rules: [{ name: shaped, algorithm: leaky-bucket, shape: true, capacity: 3, leakRate: 1, leakInterval: 1m }]\n',
      { upstream: upstream.url, clock: manualClock(1_750_000_000_000) },
    )
    try {
      expect((await fetch(`${shaping.url}/first`)).status).toBe(200)
      const before = upstream.upgrades.length
      const client = rawClient(shaping.gateway.port)
      client.socket.write(handshake('/chat'))
      await until(async () => (await metricsOf(shaping)).includes('edgelimit_in_flight_requests 1'))
      client.socket.end()
      await until(async () => (await metricsOf(shaping)).includes('edgelimit_responses_total{code="499"} 1'))
      expect(await metricsOf(shaping)).toContain('edgelimit_in_flight_requests 0')
      expect(upstream.upgrades.length).toBe(before)
    } finally {
      await shaping.close()
    }
  })
})

describe('an upgrade the rules deny', () => {
  test('gets the 429 problem with the rate-limit fields and Connection: close; the upstream never sees it', async () => {
    // Decisions on a clock that stands still: on the system clock, a minute's end between the
    // handshakes admitted the third.
    const limited = await startInProcess(
      'rules: [{ name: sockets, algorithm: fixed-window, limit: 2, window: 1m }]\n',
      { upstream: upstream.url, clock: manualClock(1_750_000_000_000) },
    )
    try {
      const before = upstream.upgrades.length
      const first = await open(`${limited.url.replace('http', 'ws')}/chat`)
      const second = await open(`${limited.url.replace('http', 'ws')}/chat`)
      const { res, body } = await refused(`${limited.url.replace('http', 'ws')}/chat`)
      expect(res.statusCode).toBe(429)
      expect(res.headers['content-type']).toBe('application/problem+json')
      expect(res.headers.connection).toBe('close')
      expect(res.headers['retry-after']).toMatch(/^\d+$/)
      expect(res.headers.ratelimit).toMatch(/^"sockets";r=0;t=\d+$/)
      expect(res.headers['ratelimit-policy']).toBe('"sockets";q=2;w=60')
      expect(JSON.parse(body)).toMatchObject({ status: 429 })
      expect(upstream.upgrades.length - before).toBe(2)
      const metrics = await metricsOf(limited)
      expect(metrics).toContain('edgelimit_responses_total{code="101"} 2')
      expect(metrics).toContain('edgelimit_responses_total{code="429"} 1')
      expect(metrics).toContain('edgelimit_websocket_tunnels 2')
      // The tunnels that were admitted still work.
      first.ws.send('still here')
      expect(await first.next()).toBe('hello')
      expect(await first.next()).toBe('echo: still here')
      first.ws.close()
      second.ws.close()
      await Promise.all([first.closed, second.closed])
    } finally {
      await limited.close()
    }
  })
})

describe('an upgrade the upstream does not accept', () => {
  test('its answer (403) is relayed with the rate-limit fields, then the connection closes', async () => {
    const { res, body } = await refused(`${gw.url.replace('http', 'ws')}/refuse`)
    expect(res.statusCode).toBe(403)
    expect(body).toBe('no way\n')
    expect(res.headers.connection).toBe('close')
    expect(res.headers['ratelimit-policy']).toBe('"sockets";q=1000;w=60')
    expect(await metricsOf(gw)).toContain('edgelimit_upstream_responses_total{code="403"} 1')
  })

  test('an unreachable upstream answers 502 problem+json', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createNetServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port
        s.close(() => resolve(p))
      })
    })
    const down = await startInProcess(
      'rules: [{ name: all, algorithm: fixed-window, limit: 10, window: 1m }]\n',
      {
        upstream: `http://127.0.0.1:${port}`,
      },
    )
    try {
      const { res, body } = await refused(`${down.url.replace('http', 'ws')}/chat`)
      expect(res.statusCode).toBe(502)
      expect(res.headers['content-type']).toBe('application/problem+json')
      expect(res.headers.ratelimit).toMatch(/^"all";r=9;t=\d+$/)
      const problem = JSON.parse(body) as Record<string, unknown>
      expect(problem).toMatchObject({ status: 502, title: 'Bad Gateway', instance: '/chat' })
      expect(String(problem.detail)).toContain('ECONNREFUSED')
      const metrics = await metricsOf(down)
      expect(metrics).toContain('edgelimit_responses_total{code="502"} 1')
      expect(metrics).toContain('edgelimit_upstream_responses_total{code="error"} 1')
    } finally {
      await down.close()
    }
  })

  test('an upstream that closes without answering, or answers with what is not HTTP (a status outside 100–599 included, which Node cannot relay): a 502 that says so', async () => {
    const answers: [string, RegExp][] = [
      ['', /^The upstream closed the connection before it answered \(ECONNRESET\)\.$/],
      ['HELLO\r\n\r\n', /^The upstream's answer is not valid HTTP \(HPE_[A-Z_]+\)\.$/],
      [
        'HTTP/1.1 099 Low\r\ncontent-length: 2\r\n\r\nok',
        /^The upstream's answer is not valid HTTP \(status 99 is not one of 100–599\)\.$/,
      ],
      // A body in a transfer coding its HTTP client does not take off: relayed, it would pass as plain.
      [
        'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
        /^The upstream's answer is in a transfer coding the gateway does not decode \(Transfer-Encoding: gzip, chunked\)\.$/,
      ],
      // Node's client takes a 101 without `Connection: upgrade` as an ordinary answer: no switch.
      [
        'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n',
        /^The upstream answered 101 Switching Protocols without Connection: upgrade, so it switched to no protocol\.$/,
      ],
      [
        'HTTP/1.1 600 High\r\ncontent-length: 2\r\n\r\nok',
        /^The upstream's answer is not valid HTTP \(status 600 is not one of 100–599\)\.$/,
      ],
    ]
    for (const [answer, detail] of answers) {
      const upstream = createNetServer((socket) => {
        socket.on('error', () => {})
        socket.once('data', () => socket.end(answer))
      })
      await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
      const mine = await startInProcess('rules: []\n', {
        upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      })
      try {
        const { res, body } = await refused(`${mine.url.replace('http', 'ws')}/chat`)
        expect(res.statusCode).toBe(502)
        expect((JSON.parse(body) as { detail: string }).detail).toMatch(detail)
      } finally {
        await mine.close()
        upstream.close()
      }
    }
  })

  test('an answer complete at its head (a 204) is relayed although bytes the upstream must not send follow it', async () => {
    // Node's client parses the stray `ok` as the next answer and fails: the 204 was already whole.
    const upstream = createNetServer((socket) => {
      socket.on('error', () => {})
      socket.once('data', () => socket.end('HTTP/1.1 204 No Content\r\ncontent-length: 2\r\n\r\nok'))
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    const mine = await startInProcess('rules: []\n', {
      upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    })
    try {
      const { res, body } = await refused(`${mine.url.replace('http', 'ws')}/chat`)
      expect(res.statusCode).toBe(204)
      expect(body).toBe('')
      await until(async () =>
        (await metricsOf(mine)).includes('edgelimit_upstream_responses_total{code="204"} 1'),
      )
    } finally {
      await mine.close()
      upstream.close()
    }
  })

  test('an upstream that never answers the handshake gets 504 after upstream.timeout', async () => {
    // Reads (so that it sees the gateway leave) and never answers.
    const silent = createNetServer((socket) => socket.on('error', () => {}).resume())
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
    const slow = await startInProcess(
      `upstream: { url: http://127.0.0.1:${(silent.address() as AddressInfo).port}, timeout: 200ms }\nrules: []\n`,
    )
    try {
      const { res, body } = await refused(`${slow.url.replace('http', 'ws')}/chat`)
      expect(res.statusCode).toBe(504)
      expect(JSON.parse(body)).toMatchObject({ status: 504 })
    } finally {
      await slow.close()
      await new Promise((r) => silent.close(r))
    }
  })
})

describe('shutdown', () => {
  test('closes open tunnels, both sides, once requests in flight are done', async () => {
    const own = await startInProcess('rules: []\n', { upstream: upstream.url })
    const client = await open(`${own.url.replace('http', 'ws')}/chat`)
    expect(await client.next()).toBe('hello')
    await until(() => upstream.sockets.size === 1)
    const [serverSide] = upstream.sockets
    const serverClosed = new Promise<number>((r) => serverSide?.on('close', (code) => r(code)))
    await own.close()
    expect((await client.closed).code).toBe(1006)
    expect(await serverClosed).toBe(1006)
    expect(own.logs.find((l) => l.msg === 'draining')).toMatchObject({ tunnels: 1 })
  })
})

describe('other upgrades', () => {
  /** Sends raw request heads on one connection and reads the answers. */
  async function exchange(heads: string[]): Promise<string> {
    const socket = connect(gw.gateway.port, '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      text += chunk
    })
    for (const [i, head] of heads.entries()) {
      socket.write(head)
      await until(() => text.split('HTTP/1.1 ').length - 1 > i && text.endsWith('}'))
    }
    socket.destroy()
    return text
  }

  test('h2c is an ordinary request (Upgrade stripped), bodies included, and the connection is kept', async () => {
    const before = upstream.requests.length
    const text = await exchange([
      'GET /plain HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
      'POST /form HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 5\r\n\r\nab=cd',
      'GET /again HTTP/1.1\r\nHost: gw\r\n\r\n',
    ])
    const answers = text.split(/(?=HTTP\/1\.1 )/)
    expect(answers).toHaveLength(3)
    for (const answer of answers) {
      expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      expect(answer).not.toMatch(/\r\nconnection: close\r\n/i)
      expect(answer).toMatch(/\r\nratelimit-policy: "sockets";q=1000;w=60\r\n/i)
    }
    const seen = upstream.requests.slice(before)
    expect(seen.map((r) => [r.method, r.url, r.headers.upgrade, r.body])).toEqual([
      ['GET', '/plain', undefined, ''],
      ['POST', '/form', undefined, 'ab=cd'],
      ['GET', '/again', undefined, ''],
    ])
    expect(seen[0]?.headers['http2-settings']).toBeUndefined()
  })

  test('a request pipelined behind an h2c request is answered too (Node would drop it after an upgrade)', async () => {
    const before = upstream.requests.length
    const client = rawClient(gw.gateway.port)
    client.socket.write(
      'GET /h2c HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\nGET /after HTTP/1.1\r\nHost: gw\r\n\r\n',
    )
    await until(() => client.text.split('HTTP/1.1 ').length === 3 && client.text.endsWith('}'))
    const answers = client.text.split(/(?=HTTP\/1\.1 )/)
    expect(answers.map((a) => [a.slice(0, 15), /"url":"([^"]+)"/.exec(a)?.[1]])).toEqual([
      ['HTTP/1.1 200 OK', '/h2c'],
      ['HTTP/1.1 200 OK', '/after'],
    ])
    const seen = upstream.requests.slice(before)
    expect(seen.map((r) => [r.url, r.headers.upgrade, r.headers['http2-settings']])).toEqual([
      ['/h2c', undefined, undefined],
      ['/after', undefined, undefined],
    ])
    client.socket.destroy()
  })

  test('an h2c request with `Connection: close` is answered, and nothing pipelined behind it is served', async () => {
    // What the parser refused behind it (data after `Connection: close`) was answered at once: a
    // 400 in place of the answer to the request the upstream had already been sent.
    const before = upstream.requests.length
    const client = rawClient(gw.gateway.port)
    client.socket.write(
      `GET /h2c HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings, close\r\n${H2C}\r\nGET /after HTTP/1.1\r\nHost: gw\r\n\r\n`,
    )
    const text = await client.until(() => false)
    expect(answered(text)).toEqual([['HTTP/1.1 200 OK', '/h2c']])
    expect(client.closedAfter).toBeDefined()
    expect(upstream.requests.slice(before).map((r) => r.url)).toEqual(['/h2c'])
  })

  test('behind an h2c request, a request with `Connection: close` is answered in turn and what follows it is not served', async () => {
    const before = upstream.requests.length
    const client = rawClient(gw.gateway.port)
    client.socket.write(
      `GET /h2c HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\n${H2C}\r\nGET /last HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\nGET /after HTTP/1.1\r\nHost: gw\r\n\r\n`,
    )
    const text = await client.until(() => false)
    expect(answered(text)).toEqual([
      ['HTTP/1.1 200 OK', '/h2c'],
      ['HTTP/1.1 200 OK', '/last'],
    ])
    expect(upstream.requests.slice(before).map((r) => r.url)).toEqual(['/h2c', '/last'])
  })

  test.each([
    ['a request', 'GET /after HTTP/1.1\r\nHost: gw\r\n\r\n'],
    [
      'an h2c request',
      `GET /after HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\n${H2C}\r\n`,
    ],
    ['a WebSocket handshake', handshake('/chat')],
  ])(
    '%s pipelined behind a request with `Connection: close`, answered or not yet, is not served',
    async (_, pipelined) => {
      for (const first of ['/first', '/hold-close']) {
        const before = [upstream.requests.length, upstream.upgrades.length]
        const client = rawClient(gw.gateway.port)
        client.socket.write(`GET ${first} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n${pipelined}`)
        if (first === '/hold-close') {
          await until(() => upstream.held.length === 1)
          upstream.held.shift()?.()
        }
        const text = await client.until(() => false)
        expect(answered(text)).toEqual([['HTTP/1.1 200 OK', first]])
        expect(upstream.requests.slice(before[0]).map((r) => r.url)).toEqual([first])
        expect(upstream.upgrades.length).toBe(before[1])
      }
    },
  )

  test('a POST with Upgrade: websocket is no handshake either (RFC 6455 asks for GET)', async () => {
    const before = upstream.upgrades.length
    const text = await exchange([
      'POST /x HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
    ])
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(upstream.upgrades.length).toBe(before)
  })
})

test('a rule on `upgrade: websocket` charges handshakes (the upstream gets that Upgrade), not other upgrades (it gets none)', async () => {
  // Decisions on a clock that stands still: on the system clock, an hour's end between the two
  // handshakes admitted the second.
  const guarded = await startInProcess(
    'rules: [{ name: ws-only, match: { headers: { upgrade: websocket } }, algorithm: fixed-window, limit: 1, window: 1h }]\n',
    { upstream: upstream.url, clock: manualClock(1_750_000_000_000) },
  )
  try {
    const before = upstream.requests.length
    // A POST is no handshake: forwarded as a request without Upgrade, so the rule does not apply.
    const post = await rawRequest(`${guarded.url}/x`, {
      method: 'POST',
      headers: ['Connection', 'Upgrade', 'Upgrade', 'websocket', 'Content-Length', '0'],
    })
    expect([post.status, post.headers['ratelimit-policy']]).toEqual([200, undefined])
    expect(upstream.requests[before]?.headers.upgrade).toBeUndefined()
    const client = await open(`${guarded.url.replace('http', 'ws')}/chat`)
    expect(client.headers['ratelimit-policy']).toBe('"ws-only";q=1;w=3600')
    client.ws.close()
    await client.closed
    expect((await refused(`${guarded.url.replace('http', 'ws')}/chat`)).res.statusCode).toBe(429)
  } finally {
    await guarded.close()
  }
})

describe('an upgrade pipelined behind a request still being answered', () => {
  test('a WebSocket handshake waits for that answer, then is tunnelled', async () => {
    const before = upstream.upgrades.length
    const client = rawClient(gw.gateway.port)
    client.socket.write(`GET /hold HTTP/1.1\r\nHost: gw\r\n\r\n${handshake('/chat')}`)
    await until(() => upstream.held.length === 1)
    expect(upstream.upgrades.length).toBe(before)
    upstream.held.shift()?.()
    await until(() => client.text.endsWith('\x81\x05hello'))
    const [first, second, ...rest] = client.text.split(/(?=HTTP\/1\.1 )/)
    expect(rest).toEqual([])
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*"url":"\/hold"/)
    expect(second).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n/)
    client.socket.write(frame('ping'))
    await until(() => client.text.endsWith('\x81\x0aecho: ping'))
    client.socket.destroy()
  })

  test('one behind an answer that closes the connection (a 417) is never served', async () => {
    const before = upstream.upgrades.length
    const client = rawClient(gw.gateway.port)
    client.socket.write(`GET /x HTTP/1.1\r\nHost: gw\r\nExpect: something\r\n\r\n${handshake('/chat')}`)
    await until(() => client.closed)
    expect(client.text).toMatch(/^HTTP\/1\.1 417 /)
    expect(client.text.split('HTTP/1.1 ')).toHaveLength(2)
    expect(upstream.upgrades.length).toBe(before)
    expect(gw.logs.some((l) => l.msg === 'upgrade failed')).toBe(false)
    expect((await fetch(`${gw.url}/still-up`)).status).toBe(200)
  })

  test.each([
    ['a WebSocket handshake', handshake('/chat')],
    [
      'an h2c request',
      'GET /second HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
    ],
  ])('shutdown closes the connection of %s still waiting, at the drain timeout', async (_, pipelined) => {
    const own = await startInProcess(`upstream: { url: "${upstream.url}", timeout: 10m }\nrules: []\n`, {
      drainTimeoutMs: 300,
    })
    const client = rawClient(own.gateway.port)
    client.socket.write(`GET /hold HTTP/1.1\r\nHost: gw\r\n\r\n${pipelined}`)
    await until(() => upstream.held.length === 1)
    try {
      // The answer to /hold does not come (for 10 minutes): only the drain timeout (300 ms, then
      // the final flush's few seconds) ends the connection and lets close() resolve.
      const closed = await Promise.race([
        own.close().then(() => 'closed'),
        new Promise((r) => setTimeout(r, 20_000, 'still open after 20 s')),
      ])
      expect(closed).toBe('closed')
      await until(() => client.closed)
    } finally {
      upstream.held.shift()?.()
      client.socket.destroy()
    }
  })

  test('an h2c request waits its turn like any pipelined request: both answered, in order', async () => {
    const before = upstream.requests.length
    const client = rawClient(gw.gateway.port)
    client.socket.write(
      'GET /hold HTTP/1.1\r\nHost: gw\r\n\r\nGET /second HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
    )
    await until(() => upstream.held.length === 1)
    upstream.held.shift()?.()
    await until(() => client.text.split('HTTP/1.1 ').length === 3 && client.text.endsWith('}'))
    const answers = client.text.split(/(?=HTTP\/1\.1 )/)
    expect(answers.map((a) => [a.slice(0, 15), /"url":"([^"]+)"/.exec(a)?.[1]])).toEqual([
      ['HTTP/1.1 200 OK', '/hold'],
      ['HTTP/1.1 200 OK', '/second'],
    ])
    expect(upstream.requests.slice(before).map((r) => r.url)).toEqual(['/hold', '/second'])
    client.socket.destroy()
  })
})
