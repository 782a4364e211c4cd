// The example Worker as a developer runs it: `wrangler dev --local` (wrangler 4.86.0) in
// examples/cloudflare-worker, serving on 127.0.0.1 with the Durable Object store, offline
// (metrics off; wrangler's one network look-up, for the `cf` object, falls back to a placeholder).
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { pkg, root, storageDir } from './support/workerd.js'

const example = join(root, 'examples', 'cloudflare-worker')
const built = existsSync(join(pkg, 'dist', 'cloudflare.js'))

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

let child: ChildProcess | undefined
let base = ''
let dir = ''
let log = ''

beforeAll(async () => {
  if (!built) return
  dir = storageDir()
  const [port, inspector] = [await freePort(), await freePort()]
  // Its own process group, so that stopping it also stops the workerd it starts.
  child = spawn(
    join(root, 'node_modules', '.bin', 'wrangler'),
    [
      'dev',
      '--local',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--inspector-port',
      String(inspector),
      '--persist-to',
      dir,
      '--var',
      'LIMIT:3',
      '--var',
      'WINDOW:1h',
      '--var',
      'ALGORITHM:gcra',
    ],
    {
      cwd: example,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' },
    },
  )
  base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`wrangler dev did not start in 60 s:\n${log}`)), 60_000)
    const read = (data: Buffer) => {
      log += data
      const ready = /Ready on (http:\/\/127\.0\.0\.1:\d+)/.exec(log)
      if (ready) {
        clearTimeout(timer)
        resolve(ready[1] as string)
      }
    }
    child?.stdout?.on('data', read)
    child?.stderr?.on('data', read)
    child?.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`wrangler dev exited with ${code}:\n${log}`))
    })
  })
}, 90_000)

afterAll(async () => {
  if (child?.pid !== undefined && child.exitCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve))
    process.kill(-child.pid, 'SIGTERM')
    await exited
  }
  if (dir !== '') rmSync(dir, { recursive: true, force: true })
})

it.skipIf(!built)(
  'wrangler dev serves the example, rate-limited per client with the standard headers',
  async () => {
    const get = async (path: string) => {
      const res = await fetch(base + path)
      return { status: res.status, headers: res.headers, body: await res.text() }
    }
    const open = await get('/')
    expect([open.status, open.headers.get('ratelimit')]).toEqual([200, null])

    const statuses: number[] = []
    let last = await get('/api/hello')
    statuses.push(last.status)
    expect(last.headers.get('ratelimit-policy')).toBe('"api";q=3;w=3600')
    expect(last.headers.get('ratelimit')).toBe('"api";r=2;t=1200')
    for (let i = 0; i < 3; i++) {
      last = await get('/api/hello')
      statuses.push(last.status)
    }
    expect(statuses).toEqual([200, 200, 200, 429])
    expect(last.headers.get('content-type')).toBe('application/problem+json')
    expect(last.headers.get('retry-after')).toBe('1200')
    expect(JSON.parse(last.body)).toMatchObject({
      status: 429,
      'violated-policies': ['api'],
      instance: '/api/hello',
    })
  },
  30_000,
)
