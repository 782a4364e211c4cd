// A matrix target for a runtime reached through one URL (workerd, Vercel's edge-runtime): one
// loopback listener per scenario forwards each request to it, tagged with the scenario's index
// (`x-edgelimit-scenario`), so that every scenario has a base URL of its own as the table requires.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Running, Target } from './servers.js'

const HOST = '127.0.0.1'
const SKIPPED = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'])

/** The runtime behind the listeners. */
export interface Backend {
  fetch(path: string, init: RequestInit): Promise<Response>
  dispose(): Promise<void>
}

async function readBody(req: IncomingMessage) {
  if (req.method === 'GET' || req.method === 'HEAD') return undefined
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/**
 * A target that opens `backend` and bridges every scenario to it. `tag` may add what the platform
 * would (the peer address, for a runtime with no socket of its own).
 */
export function bridgedTarget(
  name: string,
  open: () => Promise<Backend>,
  tag: (req: IncomingMessage, headers: Headers) => void = () => {},
): Target {
  return {
    name,
    async start(scenarios) {
      const backend = await open()
      const servers: Server[] = []
      const urls: string[] = []
      try {
        for (const [index] of scenarios.entries()) {
          const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
            try {
              const headers = new Headers()
              for (const [name, value] of Object.entries(req.headers)) {
                if (value !== undefined && !SKIPPED.has(name))
                  headers.set(name, Array.isArray(value) ? value.join(', ') : value)
              }
              tag(req, headers)
              headers.set('x-edgelimit-scenario', String(index))
              // The body is read at once: miniflare's responses lose an unread body to GC.
              const response = await backend.fetch(req.url ?? '/', {
                method: req.method,
                headers,
                body: await readBody(req),
                redirect: 'manual',
              })
              const out: string[] = []
              response.headers.forEach((value, name) => {
                if (!SKIPPED.has(name) && name !== 'content-encoding') out.push(name, value)
              })
              const body = Buffer.from(await response.arrayBuffer())
              res.writeHead(response.status, [...out, 'content-length', String(body.length)])
              res.end(body)
            } catch (error) {
              res.statusCode = 500
              res.end(String(error))
            }
          })
          servers.push(server)
          await new Promise<void>((resolve, reject) => {
            server.once('error', reject)
            server.listen(0, HOST, () => resolve())
          })
          urls.push(`http://${HOST}:${(server.address() as AddressInfo).port}`)
        }
      } catch (error) {
        for (const server of servers) server.close()
        await backend.dispose()
        throw error
      }
      const running: Running = {
        url: (i) => urls[i] ?? '',
        async close() {
          for (const server of servers) server.closeAllConnections()
          await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))))
          await backend.dispose()
        },
      }
      return running
    },
  }
}
