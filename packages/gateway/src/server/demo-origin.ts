import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** The built-in origin `serve` starts when no upstream is given: it echoes what it received. */
export interface DemoOrigin {
  readonly url: string
  close(): Promise<void>
}

/**
 * Starts the demo origin on a free loopback port. Every path answers JSON describing the request
 * as it arrived (method, path, the X-Forwarded-For the gateway added, body size), so a `curl`
 * through the gateway shows what was forwarded.
 *
 * @example const origin = await startDemoOrigin(); console.log(origin.url)
 */
export async function startDemoOrigin(): Promise<DemoOrigin> {
  const server: Server = createServer((req, res) => {
    let bytes = 0
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length
    })
    req.on('end', () => {
      const body = JSON.stringify(
        {
          origin: 'edgelimit demo origin',
          method: req.method,
          url: req.url,
          forwardedFor: req.headers['x-forwarded-for'] ?? null,
          apiKey: req.headers['x-api-key'] === undefined ? null : '(present)',
          receivedBytes: bytes,
        },
        null,
        2,
      )
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body) + 1,
      })
      res.end(`${body}\n`)
    })
  })
  server.keepAliveTimeout = 10_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
