/**
 * A test origin on a free loopback port. Routes:
 * - `/slow?ms=N`: answers after N ms;
 * - `/stream`: two chunks, the second only after `release()` (or 2 s);
 * - `/upload`: answers headers at once and echoes each request chunk as it arrives;
 * - `/status/<code>`: that status, with a body;
 * - `/cookies`: two Set-Cookie lines and hop-by-hop headers that must not reach the client;
 * - `/big?bytes=N`: N bytes of a repeating pattern;
 * - `/early`: a 103 Early Hints, then 200 `after hints`;
 * - `/trailers`: the request's trailer fields as JSON, chunked, announced (`Trailer`) and followed
 *   by trailer fields of its own: `x-checksum` (the body's sha256), `x-status`, `content-type`;
 * - anything else: JSON describing the request (method, url, headers, body length and sha256).
 */
import { createHash } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Echo {
  method: string
  url: string
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  bytes: number
  sha256: string
}

export interface Origin {
  readonly url: string
  readonly port: number
  /** Emits `chunk` (upload bytes as they arrive) and `request`. */
  readonly events: EventEmitter
  /** Lets `/stream` send its second chunk. */
  release(): void
  readonly requests: number
  close(): Promise<void>
}

export async function startOrigin(): Promise<Origin> {
  const events = new EventEmitter()
  let releaseStream: (() => void) | undefined
  let requests = 0
  const server = createServer((req, res) => {
    requests++
    events.emit('request', req.url)
    const url = new URL(req.url ?? '/', 'http://origin')
    // Routes also answer under /base (for an upstream URL with a path).
    const route = url.pathname.replace(/^\/base(?=\/)/, '')
    if (route === '/slow') {
      const timer = setTimeout(() => res.end('slow done'), Number(url.searchParams.get('ms') ?? 500))
      res.on('close', () => clearTimeout(timer))
      req.resume()
      return
    }
    if (route === '/stream') {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('first\n')
      const timer = setTimeout(() => res.end('second\n'), 2000)
      releaseStream = () => {
        clearTimeout(timer)
        res.end('second\n')
      }
      req.resume()
      return
    }
    if (route === '/upload') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' })
      req.on('data', (chunk: Buffer) => {
        events.emit('chunk', chunk.toString())
        res.write(chunk)
      })
      req.on('end', () => res.end())
      return
    }
    if (route.startsWith('/status/')) {
      const code = Number(route.slice(8))
      res.writeHead(code, { 'content-type': 'text/plain' })
      res.end(`status ${code}`)
      req.resume()
      return
    }
    if (route === '/cookies') {
      // A flat list keeps both Set-Cookie lines.
      res.writeHead(200, [
        'Set-Cookie',
        'a=1; Path=/',
        'Set-Cookie',
        'b=2; Path=/',
        'Connection',
        'x-origin-hop',
        'X-Origin-Hop',
        'secret',
        'X-Origin-Kept',
        'yes',
        'Content-Length',
        '2',
      ])
      res.end('ok')
      req.resume()
      return
    }
    if (route === '/early') {
      res.writeEarlyHints({ link: '</a.css>; rel=preload; as=style' })
      setTimeout(() => res.end('after hints'), 20)
      req.resume()
      return
    }
    if (route === '/trailers') {
      req.resume()
      req.on('end', () => {
        const body = JSON.stringify(req.trailers)
        res.writeHead(200, { 'content-type': 'application/json', trailer: 'x-checksum, x-status' })
        res.write(body)
        res.addTrailers({
          'x-checksum': createHash('sha256').update(body).digest('hex'),
          'x-status': 'done',
          'content-type': 'text/html',
        })
        res.end()
      })
      return
    }
    if (route === '/big') {
      const bytes = Number(url.searchParams.get('bytes') ?? 1024)
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes })
      const block = Buffer.alloc(64 * 1024, 'edgelimit-')
      let left = bytes
      const pump = () => {
        while (left > 0) {
          const n = Math.min(left, block.length)
          left -= n
          if (!res.write(block.subarray(0, n))) return void res.once('drain', pump)
        }
        res.end()
      }
      pump()
      req.resume()
      return
    }
    const hash = createHash('sha256')
    let bytes = 0
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      hash.update(chunk)
    })
    req.on('end', () => {
      const echo: Echo = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bytes,
        sha256: hash.digest('hex'),
      }
      const body = JSON.stringify(echo)
      res.writeHead(200, { 'content-type': 'application/json', 'x-origin': 'test' })
      res.end(req.method === 'HEAD' ? undefined : body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    events,
    release: () => releaseStream?.(),
    get requests() {
      return requests
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** Resolves when `origin` receives a request whose URL starts with `prefix`. */
export function arrival(origin: Origin, prefix: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const onRequest = (url: string) => {
      if (!url.startsWith(prefix)) return
      origin.events.off('request', onRequest)
      resolve()
    }
    origin.events.on('request', onRequest)
  })
}
