// A handler that passes a compressed `fetch()` response on: `fetch()` hands over the decoded body,
// and the wrapper must copy such a response to add its fields (its headers are immutable). The copy
// used to keep `content-encoding: gzip` over the decoded bytes: Deno sent them as gzip, and every
// client failed with "Invalid gzip header".
import { spawn } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { Hono } from 'hono'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { withRateLimit } from '../../src/adapters/fetch.js'
import { honoRateLimit } from '../../src/adapters/hono.js'
import { createLimiter, fixedWindow } from '../../src/index.js'

const BODY = 'hello upstream '.repeat(40)
const OPAQUE = Buffer.from([0x8b, 0x00, 0xff, 0x13, 0x37, 0x42])
const root = join(import.meta.dirname, '..', '..', '..', '..')
let upstream: Server
let url: string

beforeAll(async () => {
  const gzipped = gzipSync(BODY)
  upstream = createServer((req, res) => {
    // A coding fetch() decodes in no runtime: its bytes are handed over as they came.
    if (req.url === '/opaque') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'aes128gcm' })
      res.end(OPAQUE)
      return
    }
    res.writeHead(200, {
      'content-type': 'text/plain',
      'content-encoding': 'gzip',
      'content-length': gzipped.length,
    })
    res.end(gzipped)
  })
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`
})

afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())))

/**
 * A copy of the upstream's gzip response with the rate-limit fields: whatever fields it keeps, they
 * describe its bytes, which are the decoded body (no content-encoding left).
 */
async function expectDecodedCopy(res: Response): Promise<void> {
  const bytes = Buffer.from(await res.arrayBuffer())
  const encoding = res.headers.get('content-encoding')
  expect(encoding === 'gzip' ? gunzipSync(bytes).toString() : bytes.toString()).toBe(BODY)
  expect(encoding).toBeNull()
  const length = res.headers.get('content-length')
  if (length !== null) expect(Number(length)).toBe(bytes.length)
  expect(res.headers.get('ratelimit')).toMatch(/^"edge";r=9;t=\d+$/)
  expect(res.headers.get('content-type')).toBe('text/plain')
}

/** A copy of the upstream's aes128gcm response, which fetch() does not decode: bytes and field as they came. */
async function expectUndecodedCopy(res: Response): Promise<void> {
  expect(Buffer.from(await res.arrayBuffer())).toEqual(OPAQUE)
  expect(res.headers.get('content-encoding')).toBe('aes128gcm')
  expect(res.headers.get('ratelimit')).toMatch(/^"edge";r=9;t=\d+$/)
}

describe('fetch wrapper: a compressed fetch() response passed through', () => {
  it('Node: the copy does not claim an encoding its decoded body no longer has', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'edge', algorithm: fixedWindow({ limit: 10, window: '1h' }) }],
    })
    const handler = withRateLimit(() => fetch(url), { limiter, peer: () => '192.0.2.1' })
    await expectDecodedCopy(await handler(new Request('http://edge.test/')))
  })

  it('Node: a coding fetch() did not decode keeps its field over the bytes it names', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'edge', algorithm: fixedWindow({ limit: 10, window: '1h' }) }],
    })
    const handler = withRateLimit(() => fetch(`${url}opaque`), { limiter, peer: () => '192.0.2.1' })
    await expectUndecodedCopy(await handler(new Request('http://edge.test/')))
  })

  it('Deno: a client reads the body, with the rate-limit fields', async () => {
    const script = join(import.meta.dirname, 'support', 'passthrough-server.mjs')
    const child = spawn(
      join(root, 'node_modules', '.bin', 'deno'),
      ['run', '--no-lock', '--allow-net', '--allow-read', '--allow-env', script, url],
      { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] },
    )
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = ''
        let err = ''
        const timer = setTimeout(() => reject(new Error(`Deno did not start in 20 s: ${err}`)), 20_000)
        child.stderr?.on('data', (d) => {
          err += d
        })
        child.stdout?.on('data', (d) => {
          out += d
          if (out.includes('\n')) {
            clearTimeout(timer)
            resolve(JSON.parse(out.split('\n')[0] as string).port)
          }
        })
        child.once('exit', (code) => {
          clearTimeout(timer)
          reject(new Error(`Deno exited with ${code}: ${err}`))
        })
      })
      // Node's fetch decodes what the header names, as a browser does.
      const res = await fetch(`http://127.0.0.1:${port}/`, {
        headers: { 'accept-encoding': 'gzip' },
        signal: AbortSignal.timeout(15_000),
      })
      expect(res.status).toBe(200)
      expect(await res.text()).toBe(BODY)
      expect(res.headers.get('ratelimit')).toMatch(/^"edge";r=9;t=\d+$/)
    } finally {
      child.stdin?.end()
      child.kill('SIGTERM')
      await exited
    }
  })

  it('Hono off @hono/node-server: the copy does not claim an encoding its decoded body no longer has', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'edge', algorithm: fixedWindow({ limit: 10, window: '1h' }) }],
    })
    const app = new Hono().use(honoRateLimit({ limiter, peer: () => '192.0.2.1' })).get('/', () => fetch(url))
    await expectDecodedCopy(await app.request('/'))
  })

  it('Hono off @hono/node-server: a coding fetch() did not decode keeps its field over the bytes it names', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'edge', algorithm: fixedWindow({ limit: 10, window: '1h' }) }],
    })
    const app = new Hono()
      .use(honoRateLimit({ limiter, peer: () => '192.0.2.1' }))
      .get('/', () => fetch(`${url}opaque`))
    await expectUndecodedCopy(await app.request('/'))
  })
})
