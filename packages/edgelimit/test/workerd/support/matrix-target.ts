// The adapter matrix target for Cloudflare Workers: `matrix-worker.mjs` runs in workerd
// (miniflare), and one loopback listener per scenario forwards to it, tagging the scenario, so
// each scenario has a base URL of its own as the table requires. Requests enter workerd through
// miniflare's entry, which sets CF-Connecting-IP to the TCP peer (127.0.0.1), as Cloudflare does.
import { existsSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { Running, Target } from '../../adapters/support/servers.js'
import { pkg, startWorker } from './workerd.js'

const HOST = '127.0.0.1'
const SKIPPED = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'])

async function readBody(req: IncomingMessage) {
  if (req.method === 'GET' || req.method === 'HEAD') return undefined
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

export const workerdTarget: Target = {
  name: 'fetch (workerd, miniflare)',
  async start(scenarios) {
    if (!existsSync(join(pkg, 'dist', 'cloudflare.js')))
      throw new Error(`${pkg}/dist/cloudflare.js is missing: run \`npm run build\` first`)
    const worker = await startWorker(join(import.meta.dirname, 'matrix-worker.mjs'), {
      durableObjects: { LIMITER: 'EdgelimitDurableObject' },
    })
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
            headers.set('x-edgelimit-scenario', String(index))
            const response = await worker.fetch(req.url ?? '/', {
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
      await worker.dispose()
      throw error
    }
    const running: Running = {
      url: (i) => urls[i] ?? '',
      async close() {
        for (const server of servers) server.closeAllConnections()
        await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))))
        await worker.dispose()
      },
    }
    return running
  },
}
