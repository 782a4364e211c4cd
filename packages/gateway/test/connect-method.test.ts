// Answers on a bare connection: CONNECT asks for a tunnel, which a reverse proxy does not open,
// and what Node's HTTP parser refuses never becomes a request. The client gets an answer that
// says so (Node would close the connection without one, or with an empty one), and metrics count it.
import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type InProcess, socketReader, startInProcess } from './support/gateway.js'
import { arrival, type Origin, startOrigin } from './support/origin.js'

let gw: InProcess

beforeAll(async () => {
  // No request reaches the upstream here: any address will do.
  gw = await startInProcess('rules: []\n', { upstream: 'http://127.0.0.1:9' })
})
afterAll(async () => {
  await gw?.close()
})

test('CONNECT gets a 405 problem with Connection: close, counted in edgelimit_responses_total', async () => {
  const socket = connect(gw.gateway.port, '127.0.0.1')
  socket.on('error', () => {})
  let text = ''
  socket.on('data', (data: Buffer) => {
    text += data.toString('latin1')
  })
  socket.write('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n')
  await new Promise((resolve) => socket.on('close', resolve))
  expect(text).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/)
  expect(text).toMatch(/\r\nconnection: close\r\n/i)
  expect(text).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i)
  const problem = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>
  expect(problem).toMatchObject({ status: 405, title: 'Method Not Allowed' })
  expect(String(problem.detail)).toContain('CONNECT')
  const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
  expect(metrics).toContain('edgelimit_responses_total{code="405"} 1')
  expect(metrics).toContain('edgelimit_in_flight_requests 0')
})

/** Sends `data` on a connection of its own; resolves what came back once the gateway closed it. */
function exchange(port: number, data: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(data))
    let text = ''
    socket.on('error', () => {})
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1')
    })
    socket.on('close', () => resolve(text))
  })
}

test("what Node's parser refuses (400, 431) is counted in edgelimit_responses_total and the duration histogram", async () => {
  const own = await startInProcess('rules: []\n', { upstream: 'http://127.0.0.1:9' })
  try {
    const port = own.gateway.port
    const answers = [
      await exchange(port, 'GET e HTTP/1.1\r\nHost: x\r\n\r\n'),
      await exchange(port, 'GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n'),
      await exchange(port, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
    ]
    expect(answers.map((a) => a.slice(0, 12))).toEqual(['HTTP/1.1 400', 'HTTP/1.1 400', 'HTTP/1.1 431'])
    const metrics = await (await fetch(`${own.admin}/metrics`)).text()
    const lines = metrics.split('\n')
    expect(lines.filter((l) => l.startsWith('edgelimit_responses_total{'))).toEqual([
      'edgelimit_responses_total{code="400"} 2',
      'edgelimit_responses_total{code="431"} 1',
    ])
    expect(lines).toContain('edgelimit_request_duration_seconds_count 3')
    expect(lines.filter((l) => l.startsWith('edgelimit_upstream_responses_total{'))).toEqual([])
    expect(lines).toContain('edgelimit_in_flight_requests 0')
  } finally {
    await own.close()
  }
})

test('a client that ends mid-body after its answer (a 429 kept alive) gets that answer only, counted once', async () => {
  const own = await startInProcess(
    'rules: [{ name: deny, match: { path: /** }, algorithm: token-bucket, capacity: 1, refillRate: 1, refillInterval: 1d }]\n',
    { upstream: 'http://127.0.0.1:9' },
  )
  try {
    const socket = connect(own.gateway.port, '127.0.0.1')
    const answer = socketReader(socket)
    // The one request of the day (its 502: no upstream), then an upload that is denied.
    socket.write('GET /spend HTTP/1.1\r\nhost: a\r\n\r\n')
    await answer.until((text) => text.endsWith('}'))
    const spent = answer.text.length
    socket.write('POST /upload HTTP/1.1\r\nhost: a\r\ncontent-length: 30000000\r\n\r\n')
    socket.write(Buffer.alloc(100_000, 'x'))
    await answer.until((text) => text.length > spent && text.endsWith('}'))
    expect(answer.text.slice(spent)).toMatch(/^HTTP\/1\.1 429 /)
    expect(answer.text.slice(spent)).not.toMatch(/\r\nconnection: close\r\n/i)
    // What curl does once it has its answer: it ends its side, the body unsent.
    socket.end()
    const text = await answer.until()
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 502', 'HTTP/1.1 429'])
    expect(text).not.toContain('HPE_INVALID_EOF_STATE')
    expect(await responseCounts(own.admin)).toEqual([
      'edgelimit_responses_total{code="429"} 1',
      'edgelimit_responses_total{code="502"} 1',
    ])
  } finally {
    await own.close()
  }
})

test('a keep-alive connection whose next request the parser refuses still gets that 400, counted', async () => {
  const own = await startInProcess('rules: []\n', { upstream: 'http://127.0.0.1:9' })
  try {
    const socket = connect(own.gateway.port, '127.0.0.1')
    const answer = socketReader(socket)
    socket.write('GET /first HTTP/1.1\r\nhost: a\r\n\r\n')
    await answer.until((text) => text.endsWith('}'))
    socket.write('GET /second HTTP/1.1\r\nhost: a\r\nBad Header: y\r\n\r\n')
    const text = await answer.until()
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 502', 'HTTP/1.1 400'])
    expect(await responseCounts(own.admin)).toEqual([
      'edgelimit_responses_total{code="400"} 1',
      'edgelimit_responses_total{code="502"} 1',
    ])
  } finally {
    await own.close()
  }
})

describe('a request the parser refuses behind one still being answered', () => {
  // A first request the origin answers in 300 ms, and one Node's parser refuses.
  const SLOW = 'GET /slow?ms=300 HTTP/1.1\r\nhost: a\r\n\r\n'
  const BAD = 'GET /second HTTP/1.1\r\nhost: a\r\nBad Header: y\r\n\r\n'
  const BOTH_COUNTED = ['edgelimit_responses_total{code="200"} 1', 'edgelimit_responses_total{code="400"} 1']

  /** Runs `body` with a gateway of its own before a fresh origin, and a raw connection to it. */
  async function connected(body: (c: { own: InProcess; origin: Origin; socket: Socket }) => Promise<void>) {
    const origin = await startOrigin()
    const own = await startInProcess('rules: []\n', { upstream: origin.url })
    try {
      await body({ own, origin, socket: connect(own.gateway.port, '127.0.0.1') })
    } finally {
      await own.close()
      await origin.close()
    }
  }

  test('pipelined behind one in flight, it is answered after it', () =>
    connected(async ({ own, origin, socket }) => {
      const answer = socketReader(socket)
      const arrived = arrival(origin, '/slow')
      // Both in one write: the parser refuses the second while the first waits for its upstream.
      socket.write(SLOW + BAD)
      await arrived
      const text = await answer.until()
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400'])
      expect(text).toContain('\r\n\r\nslow done')
      expect(text.slice(text.indexOf('HTTP/1.1 400'))).toMatch(/HPE_INVALID_HEADER_TOKEN/)
      expect(await responseCounts(own.admin)).toEqual(BOTH_COUNTED)
    }))

  test('sent while the answer before it streams, it lets that answer finish', () =>
    connected(async ({ own, origin, socket }) => {
      const answer = socketReader(socket)
      socket.write('GET /stream HTTP/1.1\r\nhost: a\r\n\r\n')
      await answer.until((text) => text.includes('first\n'))
      socket.write(BAD)
      origin.release()
      const text = await answer.until()
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400'])
      expect(text).toMatch(/second\n\r\n0\r\n\r\nHTTP\/1\.1 400 /)
      expect(await responseCounts(own.admin)).toEqual(BOTH_COUNTED)
    }))

  test('a CONNECT pipelined behind one in flight gets its 405 after that answer', () =>
    connected(async ({ own, origin, socket }) => {
      const answer = socketReader(socket)
      const arrived = arrival(origin, '/slow')
      socket.write(`${SLOW}CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n`)
      await arrived
      const text = await answer.until()
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 405'])
      expect(text).toContain('\r\n\r\nslow done')
      expect(await responseCounts(own.admin)).toEqual([
        'edgelimit_responses_total{code="200"} 1',
        'edgelimit_responses_total{code="405"} 1',
      ])
    }))

  test('one whose body the client cut short (its FIN) while it waited is answered 400 in its turn, not held', () =>
    connected(async ({ own, origin, socket }) => {
      const answer = socketReader(socket)
      const arrived = arrival(origin, '/slow')
      // The parser fails at the FIN, mid-body of the second request: that body can never complete.
      socket.end(`${SLOW}POST /upload HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel`)
      await arrived
      const text = await answer.until()
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400'])
      expect(text.slice(text.indexOf('HTTP/1.1 400'))).toMatch(/HPE_INVALID_EOF_STATE/)
      expect(origin.requests).toBe(1)
      await expect.poll(() => own.gateway.metrics.inFlight).toBe(0)
      expect(await responseCounts(own.admin)).toEqual(BOTH_COUNTED)
    }))

  test('its client leaving while it waits is let go', () =>
    connected(async ({ own, origin, socket }) => {
      socket.on('error', () => {})
      const arrived = arrival(origin, '/slow')
      socket.write(SLOW + BAD)
      await arrived
      socket.destroy()
      for (let i = 0; i < 150 && own.gateway.metrics.inFlight !== 0; i++)
        await new Promise((r) => setTimeout(r, 20))
      expect(own.gateway.metrics.inFlight).toBe(0)
      // The refused request was never answered: nothing counted for it.
      expect(await responseCounts(own.admin)).toEqual(['edgelimit_responses_total{code="499"} 1'])
    }))
})

/** The gateway's edgelimit_responses_total lines, sorted. */
async function responseCounts(admin: string): Promise<string[]> {
  const metrics = await (await fetch(`${admin}/metrics`)).text()
  return metrics
    .split('\n')
    .filter((l) => l.startsWith('edgelimit_responses_total{'))
    .sort()
}
