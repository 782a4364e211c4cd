// The adapter matrix target for Cloudflare Workers: `matrix-worker.mjs` runs in workerd
// (miniflare), bridged per scenario (adapters/support/bridge.ts). Requests enter workerd through
// miniflare's entry, which sets CF-Connecting-IP to the TCP peer (127.0.0.1), as Cloudflare does.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { bridgedTarget } from '../../adapters/support/bridge.js'
import { pkg, startWorker } from './workerd.js'

export const workerdTarget = bridgedTarget('fetch (workerd, miniflare)', async () => {
  if (!existsSync(join(pkg, 'dist', 'cloudflare.js')))
    throw new Error(`${pkg}/dist/cloudflare.js is missing: run \`npm run build\` first`)
  const worker = await startWorker(join(import.meta.dirname, 'matrix-worker.mjs'), {
    durableObjects: { LIMITER: 'EdgelimitDurableObject' },
  })
  return { fetch: worker.fetch, dispose: () => worker.dispose() }
})
