// The adapter matrix target for Vercel Edge: `edge-runtime-app.mjs`, bundled with esbuild into one
// script, runs in Vercel's `edge-runtime` (the isolate `vercel dev` and `next dev` use), served by
// its own HTTP server and bridged per scenario; the bridge passes the TCP peer as the platform would.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { EdgeRuntime, runServer } from 'edge-runtime'
import { build } from 'esbuild'
import { bridgedTarget } from './bridge.js'

const dist = join(import.meta.dirname, '..', '..', '..', 'dist')

export const edgeRuntimeTarget = bridgedTarget(
  'fetch (Vercel edge-runtime)',
  async () => {
    if (!existsSync(join(dist, 'fetch.js')))
      throw new Error(`${dist}/fetch.js is missing: run \`npm run build\` first`)
    const bundled = await build({
      entryPoints: [join(import.meta.dirname, 'edge-runtime-app.mjs')],
      bundle: true,
      format: 'iife',
      platform: 'neutral',
      write: false,
      logLevel: 'silent',
    })
    const runtime = new EdgeRuntime({ initialCode: bundled.outputFiles[0]?.text ?? '' })
    const server = await runServer({ runtime, port: 0, host: '127.0.0.1' })
    const base = server.url.replace(/\/$/, '')
    return { fetch: (path, init) => fetch(`${base}${path}`, init), dispose: () => server.close() }
  },
  (req, headers) => {
    headers.delete('x-edgelimit-peer')
    headers.set('x-edgelimit-peer', req.socket.remoteAddress ?? '')
  },
)
