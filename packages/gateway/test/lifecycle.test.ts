// The `edgelimit serve` process: what `npm start` runs, SIGHUP reloads, graceful shutdown.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { REPO_ROOT, spawnGateway, tempDir, writePolicy } from './support/gateway.js'
import { type Origin, startOrigin } from './support/origin.js'

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

describe('a newcomer: npm start', () => {
  test('runs edgelimit serve on examples/edgelimit.yaml', () => {
    const scripts = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).scripts as Record<
      string,
      string
    >
    expect(scripts.start).toMatch(
      /packages\/gateway\/dist\/cli\.js serve --config examples\/edgelimit\.yaml$/,
    )
  })

  test('200s with RateLimit headers, then a 429 problem+json on the login rule; the console says what to try', async () => {
    const gateway = await spawnGateway(['--config', 'examples/edgelimit.yaml'])
    try {
      expect(gateway.logs[0]).toMatchObject({ msg: 'listening', demo: true })
      // The banner goes to stderr, the logs to stdout: two pipes, no order between them.
      for (let i = 0; i < 100 && !gateway.stderr().includes('Ctrl-C'); i++)
        await new Promise((r) => setTimeout(r, 20))
      const banner = gateway.stderr()
      expect(banner).toContain('built-in demo origin')
      expect(banner).toContain(`curl -s -o /dev/null -w '%{http_code}\\n' -X POST '${gateway.url}/login'`)
      expect(banner).toContain(`${gateway.admin}/metrics`)

      const home = await fetch(`${gateway.url}/`)
      expect(home.status).toBe(200)
      expect(home.headers.get('ratelimit-policy')).toBe('"global";q=20;w=10')
      expect(home.headers.get('ratelimit')).toMatch(/^"global";r=19;t=\d+$/)
      expect(((await home.json()) as { origin: string }).origin).toBe('edgelimit demo origin')

      for (let i = 0; i < 5; i++) {
        const login = await fetch(`${gateway.url}/login`, { method: 'POST' })
        expect(login.status).toBe(200)
        expect(login.headers.get('ratelimit')).toMatch(
          new RegExp(`^"login";r=${4 - i};t=\\d+, "global";r=\\d+;t=\\d+$`),
        )
        await login.arrayBuffer()
      }
      const denied = await fetch(`${gateway.url}/login`, { method: 'POST' })
      expect(denied.status).toBe(429)
      expect(denied.headers.get('content-type')).toBe('application/problem+json')
      expect(denied.headers.get('retry-after')).toMatch(/^\d+$/)
      expect(await denied.json()).toMatchObject({
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        title: 'Too Many Requests',
        status: 429,
        instance: '/login',
        'violated-policies': ['login'],
      })
      expect(await gateway.stop('SIGINT')).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })
})

describe('signals', () => {
  test('SIGHUP reloads the policy (file watching off); an invalid file is rejected and the old policy stays', async () => {
    const dir = tempDir()
    const file = writePolicy(
      dir,
      'rules: [{ name: r, match: { path: /x }, algorithm: fixed-window, limit: 1, window: 1h }]\n',
    )
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url, '--no-watch'])
    try {
      expect([(await fetch(`${gateway.url}/x`)).status, (await fetch(`${gateway.url}/x`)).status]).toEqual([
        200, 429,
      ])
      writeFileSync(
        file,
        'rules: [{ name: r, match: { path: /x }, algorithm: fixed-window, limit: 1, window: 1h }, { name: y, match: { path: /y }, algorithm: fixed-window, limit: 1, window: 1h }]\n',
      )
      gateway.child.kill('SIGHUP')
      await gateway.waitForLog((l) => l.msg === 'policy reloaded')
      // Rule r is unchanged: its counter survived. Rule y is new.
      expect((await fetch(`${gateway.url}/x`)).status).toBe(429)
      expect([(await fetch(`${gateway.url}/y`)).status, (await fetch(`${gateway.url}/y`)).status]).toEqual([
        200, 429,
      ])
      writeFileSync(file, 'rules: [{ name: r, algorithm: fixed-window, limit: -1, window: 1h }]\n')
      gateway.child.kill('SIGHUP')
      const rejected = await gateway.waitForLog((l) => l.msg.startsWith('policy rejected'))
      expect(rejected.issues).toEqual([expect.stringContaining(':1:')])
      expect((await fetch(`${gateway.url}/y`)).status).toBe(429)
      expect(await gateway.stop()).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })

  test('SIGTERM drains: a request in flight completes, new connections are refused, exit 0', async () => {
    const file = writePolicy(tempDir(), 'rules: []\n')
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url])
    try {
      const slow = fetch(`${gateway.url}/slow?ms=700`)
      await new Promise((r) => setTimeout(r, 150))
      gateway.child.kill('SIGTERM')
      await gateway.waitForLog((l) => l.msg === 'draining')
      expect(gateway.logs.find((l) => l.msg === 'draining')?.inFlight).toBe(1)
      // Not ready any more (the load balancer stops sending), and the listener is closed.
      const ready = await fetch(`${gateway.admin}/readyz`)
      expect(ready.status).toBe(503)
      expect(await ready.json()).toMatchObject({ ready: false, draining: true })
      await expect(fetch(`${gateway.url}/echo`, { headers: { connection: 'close' } })).rejects.toThrow()
      const response = await slow
      expect(response.status).toBe(200)
      expect(await response.text()).toBe('slow done')
      expect(await gateway.exited).toBe(0)
      expect(gateway.logs.at(-1)?.msg).toBe('stopped')
    } finally {
      await gateway.stop('SIGKILL')
    }
  })
})
