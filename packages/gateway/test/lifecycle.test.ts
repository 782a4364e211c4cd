// The `edgelimit serve` process: what `npm start` runs, SIGHUP reloads, graceful shutdown.
import { mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { type AddressInfo, createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type RedisServer, redisCommand, startRedis } from '../../edgelimit/test/support/redis.js'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { PolicyError } from '../src/config/issues.js'
import {
  GATEWAY_ROOT,
  REPO_ROOT,
  runCli,
  spawnGateway,
  startInProcess,
  tempDir,
  writePolicy,
} from './support/gateway.js'
import { arrival, type Origin, startOrigin } from './support/origin.js'

/**
 * The fixed windows' length where a test counts: they count on the system clock or Redis TIME, and
 * a test that spanned the end of one (an hour's at XX:00:00) would see its counts start again.
 */
const WINDOW = farWindow()

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

  test('on an IPv6 --host, the banner and its curl commands name URLs that work', async () => {
    const gateway = await spawnGateway([
      '--config',
      'examples/edgelimit.yaml',
      '--upstream',
      origin.url,
      '--host',
      '::1',
      '--admin-host',
      '::',
    ])
    try {
      for (let i = 0; i < 500 && !gateway.stderr().includes('Ctrl-C'); i++)
        await new Promise((r) => setTimeout(r, 20))
      const base = `http://[::1]:${gateway.port}`
      expect(gateway.stderr()).toContain(`proxy  ${base}  →`)
      expect(gateway.stderr()).toContain(`admin  http://[::1]:${gateway.adminPort}  (`)
      expect(gateway.stderr()).toContain(`-X POST '${base}/login'`)
      expect((await fetch(`${base}/x`)).status).toBe(200)
    } finally {
      await gateway.stop()
    }
  })

  test('an upstream URL with credentials or a query is refused (flag, start, reload), and no log or error shows them', async () => {
    // The gateway would send neither: refused, never dropped or logged (docs/decisions/0015).
    const upstream = origin.url.replace('http://', 'http://proxyuser:s3cr3t@')
    const masked = `${origin.url.replace('http://', 'http://***@')}/?***`
    const flag = await runCli([
      'serve',
      '--config',
      'examples/edgelimit.yaml',
      '--upstream',
      `${upstream}/?k=s3cr3t-q`,
    ])
    expect(flag.code, flag.stderr).toBe(2)
    expect(flag.stderr).toContain(
      `--upstream: expected an upstream URL without a user or password, got "${masked}"`,
    )
    expect(flag.stderr).toContain(
      `--upstream: expected an upstream URL without a query or fragment, got "${masked}"`,
    )
    const dir = tempDir()
    const rule = 'rules: [{ name: r, match: { path: /x }, algorithm: fixed-window, limit: 1, window: 1h }]\n'
    const file = writePolicy(dir, `upstream: "${upstream}/?k=s3cr3t-q"\n${rule}`)
    const start = await runCli(['serve', '--config', file, '--port', '0', '--admin-port', '0'])
    expect(start.code, start.stderr).toBe(1)
    expect(start.stderr).toContain(
      `upstream: expected an upstream URL without a user or password, got "${masked}"`,
    )
    expect(start.stderr).toContain(': not started')
    for (const out of [flag, start]) expect(out.stdout + out.stderr).not.toContain('s3cr3t')

    // A reload to such a URL keeps the policy in force, and its upstream.
    writePolicy(dir, `upstream: "${origin.url}"\n${rule}`)
    const gateway = await spawnGateway(['--config', file, '--no-watch'])
    try {
      for (let i = 0; i < 500 && !gateway.stderr().includes('Ctrl-C'); i++)
        await new Promise((r) => setTimeout(r, 20))
      const { version } = JSON.parse(readFileSync(join(GATEWAY_ROOT, 'package.json'), 'utf8')) as {
        version: string
      }
      expect(gateway.logs.find((l) => l.msg === 'listening')).toMatchObject({ upstream: origin.url, version })
      expect(await (await fetch(`${gateway.admin}/metrics`)).text()).toContain(
        `edgelimit_build_info{version="${version}",node="${process.version}"} 1`,
      )
      expect(gateway.stderr()).toContain(`→  ${origin.url}`)
      expect(gateway.stderr()).toContain(': 1 rule, memory store')
      expect((await fetch(`${gateway.url}/x`)).status).toBe(200)
      writePolicy(dir, `upstream: { url: "${upstream}/base?k=s3cr3t-q" }\n${rule}`)
      gateway.child.kill('SIGHUP')
      const rejected = await gateway.waitForLog((l) => l.msg.startsWith('policy rejected'))
      expect(rejected.issues).toEqual([
        expect.stringContaining('upstream.url: expected an upstream URL without a user or password'),
        expect.stringContaining('upstream.url: expected an upstream URL without a query or fragment'),
      ])
      const seen = await fetch(`${gateway.url}/y`)
      expect(seen.status).toBe(200)
      expect(((await seen.json()) as { url: string }).url).toBe('/y')
      expect((await fetch(`${gateway.url}/x`)).status).toBe(429)
      expect(JSON.stringify(gateway.logs) + gateway.stderr()).not.toContain('s3cr3t')
    } finally {
      await gateway.stop()
    }
  })

  test('startGateway refuses such an upstream option as --upstream does: a PolicyError with ERR_URL, the URL masked, nothing opened', async () => {
    const upstream = origin.url.replace('http://', 'http://proxyuser:s3cr3t@')
    const port = await freePort()
    const credentials = 'expected an upstream URL without a user or password, got'
    const query = 'expected an upstream URL without a query or fragment, got'
    for (const [url, masked, expected] of [
      [
        `${upstream}/?k=s3cr3t-q`,
        `${origin.url.replace('http://', 'http://***@')}/?***`,
        [credentials, query],
      ],
      [`${origin.url}/base#s3cr3t`, `${origin.url}/base#***`, [query]],
      [
        'ftp://user:s3cr3t@files.example.com',
        'ftp://***@files.example.com',
        ['expected a URL starting with http:// or https://, got'],
      ],
    ] as const) {
      const outcome = await startInProcess('rules: []\n', { upstream: url, port }).then(
        async (started) => {
          await started.close()
          return undefined
        },
        (error: unknown) => error,
      )
      expect(outcome, url).toBeInstanceOf(PolicyError)
      const { issues, message } = outcome as PolicyError
      expect(issues).toEqual(
        expected.map((m) => ({
          path: ['upstream'],
          code: 'ERR_URL',
          message: expect.stringContaining(`${m} "${masked}" (string)`),
        })),
      )
      expect(message).toContain('[ERR_URL]')
      expect(message).not.toContain('s3cr3t')
    }
    // Refused before the proxy listened.
    await expect(fetch(`http://127.0.0.1:${port}/`)).rejects.toThrow()
  })

  test('200s with RateLimit headers, then a 429 problem+json on the login rule; the console says what to try', async () => {
    const gateway = await spawnGateway(['--config', 'examples/edgelimit.yaml'])
    try {
      expect(gateway.logs[0]).toMatchObject({ msg: 'listening', demo: true })
      // The banner goes to stderr, the logs to stdout: two pipes, no order between them (up to 10 s).
      for (let i = 0; i < 500 && !gateway.stderr().includes('Ctrl-C'); i++)
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
      `rules: [{ name: r, match: { path: /x }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`,
    )
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url, '--no-watch'])
    try {
      expect([(await fetch(`${gateway.url}/x`)).status, (await fetch(`${gateway.url}/x`)).status]).toEqual([
        200, 429,
      ])
      writeFileSync(
        file,
        `rules: [{ name: r, match: { path: /x }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }, { name: y, match: { path: /y }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`,
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
      // Nested too deep through a chain of aliases: one issue, and the policy in force stays.
      const chain = [`x0: &a0 ${'['.repeat(60)}${']'.repeat(60)}`]
      for (let i = 1; i < 150; i++) chain.push(`x${i}: &a${i} ${'['.repeat(60)}*a${i - 1}${']'.repeat(60)}`)
      writeFileSync(file, `${chain.join('\n')}\nrules: [*a149]\n`)
      gateway.child.kill('SIGHUP')
      const deep = await gateway.waitForLog((l) => l.msg.startsWith('policy rejected') && l !== rejected)
      expect(deep.issues).toEqual([expect.stringMatching(/:2:69 .*deeper than 64 levels .*\[ERR_YAML\]$/)])
      expect((await fetch(`${gateway.url}/y`)).status).toBe(429)
      expect(await gateway.stop()).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })

  test('a reload that throws (a store client refusing its URL) is rejected; the gateway keeps serving and reloads again', async () => {
    const dir = tempDir()
    const rule = `rules: [{ name: r, match: { path: /x }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`
    const file = writePolicy(dir, rule)
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url, '--no-watch'])
    try {
      expect([(await fetch(`${gateway.url}/x`)).status, (await fetch(`${gateway.url}/x`)).status]).toEqual([
        200, 429,
      ])
      const rejections = () => gateway.logs.filter((l) => l.msg.startsWith('policy rejected'))
      // Valid to `check`, but ioredis throws on an option of its own in the query (check does
      // not model ioredis's query options).
      writeFileSync(file, `store: "redis://127.0.0.1:1?sentinels=x"\n${rule}`)
      gateway.child.kill('SIGHUP')
      const thrown = await gateway.waitForLog((l) => l.msg.startsWith('policy rejected'))
      expect(thrown).toMatchObject({
        level: 50,
        generation: 1,
        err: 'cannot open the redis store: Requires the name of master.',
      })
      // What the Upstash client refuses, `check` refuses too.
      writeFileSync(file, `store: { type: upstash, url: "HTTPS://example.upstash.io", token: t }\n${rule}`)
      gateway.child.kill('SIGHUP')
      for (let i = 0; i < 250 && rejections().length < 2; i++) await new Promise((r) => setTimeout(r, 20))
      expect(rejections()[1]?.issues).toEqual([
        expect.stringContaining('store.url: expected a URL as the Upstash client takes it'),
      ])
      // Generation 1 is still in force, with its counter, and a later reload works.
      expect((await fetch(`${gateway.url}/x`)).status).toBe(429)
      writeFileSync(file, rule.replace('/x', '/y'))
      gateway.child.kill('SIGHUP')
      await gateway.waitForLog((l) => l.msg === 'policy reloaded')
      expect((await fetch(`${gateway.url}/y`)).status).toBe(429)
      expect((await fetch(`${gateway.url}/x`)).status).toBe(200)
      const metrics = await (await fetch(`${gateway.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_config_reloads_total{result="failure"} 2')
      expect(metrics).toContain('edgelimit_config_generation 2')
      expect(await gateway.stop()).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })

  test('a SIGHUP while it starts (waiting for its store) does not end the process: it reloads once started', async () => {
    // A Redis that answers nothing until released: the gateway waits for it before it listens.
    let released = false
    const held: Socket[] = []
    const answer = (socket: Socket, text: string) => {
      // One reply per command (RESP arrays): INFO, which tells ready, then anything else.
      for (const command of text.split(/\*\d+\r\n/).slice(1)) {
        const info = /^\$4\r\ninfo\r\n/i.test(command)
        const body = 'redis_version:7.2.0\r\nloading:0\r\n'
        socket.write(info ? `$${body.length}\r\n${body}\r\n` : '+OK\r\n')
      }
    }
    const redis = createServer((socket) => {
      let pending = ''
      held.push(socket)
      socket.on('error', () => {})
      socket.on('data', (chunk) => {
        if (released) answer(socket, chunk.toString('latin1'))
        else pending += chunk.toString('latin1')
      })
      socket.on('release', () => answer(socket, pending))
    })
    await new Promise<void>((resolve) => redis.listen(0, '127.0.0.1', resolve))
    const connected = new Promise<void>((resolve) => redis.once('connection', () => resolve()))
    const file = writePolicy(
      tempDir(),
      `store: redis://127.0.0.1:${(redis.address() as AddressInfo).port}\nrules: []\n`,
    )
    let hup: Promise<void> | undefined
    const started = spawnGateway(['--config', file, '--upstream', origin.url, '--no-watch'], {
      onSpawn: (child) => {
        // Once its store client is connecting (the process is up, not listening yet): SIGHUP, then
        // let the store answer.
        hup = connected.then(async () => {
          child.kill('SIGHUP')
          await new Promise((r) => setTimeout(r, 200))
          released = true
          for (const socket of held) socket.emit('release')
        })
      },
    })
    try {
      const gateway = await started
      await hup
      const reloaded = await gateway.waitForLog((l) => l.msg === 'policy reloaded')
      expect(reloaded).toMatchObject({ reason: 'SIGHUP', generation: 2, storeKept: true })
      expect((await fetch(`${gateway.admin}/healthz`)).status).toBe(200)
      expect(await gateway.stop()).toBe(0)
    } finally {
      await started.then((g) => g.stop('SIGKILL')).catch(() => {})
      for (const socket of held) socket.destroy()
      await new Promise((r) => redis.close(r))
    }
  })

  test('SIGTERM drains: a request in flight completes, new connections are refused, exit 0', async () => {
    const file = writePolicy(tempDir(), 'rules: []\n')
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url])
    try {
      // SIGTERM once the request is at the origin, not 150 ms after sending it (on a loaded machine
      // it was not there yet: 0 in flight). The origin holds it 1.5 s: in flight when the gateway
      // handles the signal, however late the machine lets it.
      const arrived = arrival(origin, '/slow')
      const slow = fetch(`${gateway.url}/slow?ms=1500`)
      await arrived
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

  test('SIGTERM while requests are held for shaping: a turn after the drain deadline gets a 503 at once', async () => {
    // One request every 2 s reaches the origin; the drain has 3 s. Held at the signal: turns at
    // about 2, 4 and 6 s. The first is forwarded; the others would come after the gateway stops
    // and were cut with the connection (a client saw the socket close, no answer).
    const file = writePolicy(
      tempDir(),
      'rules: [{ name: queue, algorithm: leaky-bucket, shape: true, capacity: 5, leakRate: 1, leakInterval: 2s }]\n',
    )
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url, '--drain-timeout', '3s'])
    try {
      expect((await fetch(`${gateway.url}/echo`)).status).toBe(200)
      const started = performance.now()
      const held = [1, 2, 3].map(() =>
        fetch(`${gateway.url}/echo`).then(
          async (r) => ({
            status: r.status,
            retryAfter: r.headers.get('retry-after'),
            type: r.headers.get('content-type'),
            body: await r.text(),
            at: performance.now() - started,
          }),
          (error: Error) => ({ status: 0, error: error.message, at: performance.now() - started }),
        ),
      )
      const inFlight = async () =>
        /^edgelimit_in_flight_requests (\d+)$/m.exec(
          await (await fetch(`${gateway.admin}/metrics`)).text(),
        )?.[1]
      for (let i = 0; i < 200 && (await inFlight()) !== '3'; i++) await new Promise((r) => setTimeout(r, 10))
      gateway.child.kill('SIGTERM')
      await gateway.waitForLog((l) => l.msg === 'draining')
      const [first, ...late] = await Promise.all(held)
      expect(first).toMatchObject({ status: 200 })
      for (const answer of late) {
        expect(answer).toMatchObject({ status: 503, type: 'application/problem+json' })
        // Answered at the signal, not at the drain deadline (3 s) or at its turn.
        expect(answer.at).toBeLessThan(first?.at ?? 0)
        expect(Number((answer as { retryAfter: string }).retryAfter)).toBeGreaterThanOrEqual(1)
        expect(JSON.parse((answer as { body: string }).body)).toMatchObject({
          status: 503,
          instance: '/echo',
        })
      }
      expect(await gateway.exited).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })

  test.each([
    ['SIGTERM', 'SIGTERM'],
    ['SIGINT', 'SIGINT'],
    ['SIGTERM', 'SIGINT'],
    ['SIGINT', 'SIGTERM'],
  ] as const)('a second signal exits at once, exit 1: %s then %s', async (first, second) => {
    const file = writePolicy(tempDir(), 'rules: []\n')
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url])
    try {
      // A request the origin holds far longer than the test waits: the drain would wait for it.
      const arrived = arrival(origin, '/slow')
      const slow = fetch(`${gateway.url}/slow?ms=20000`).catch(() => undefined)
      await arrived
      gateway.child.kill(first)
      await gateway.waitForLog((l) => l.msg === 'draining')
      gateway.child.kill(second)
      const exit = await Promise.race([
        gateway.exited,
        new Promise<string>((r) => setTimeout(() => r('still running 5 s after the second signal'), 5000)),
      ])
      expect(exit).toBe(1)
      expect(gateway.logs.some((l) => l.msg === 'stopped')).toBe(false)
      await slow
    } finally {
      await gateway.stop('SIGKILL')
    }
  })
})

describe('file watching', () => {
  test('a Kubernetes-style symlink swap (..data renamed over) reloads; events that change nothing do not', async () => {
    const dir = tempDir()
    const rule = (path: string) =>
      `rules: [{ name: r, match: { path: ${path} }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`
    const version = (name: string, text: string) => {
      mkdirSync(join(dir, name))
      writeFileSync(join(dir, name, 'p.yaml'), text)
      symlinkSync(name, join(dir, '..data_tmp'))
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'))
    }
    mkdirSync(join(dir, '..v1'))
    writeFileSync(join(dir, '..v1', 'p.yaml'), rule('/x'))
    symlinkSync('..v1', join(dir, '..data'))
    symlinkSync(join('..data', 'p.yaml'), join(dir, 'p.yaml'))
    const gateway = await spawnGateway(['--config', join(dir, 'p.yaml'), '--upstream', origin.url])
    const reloads = () => gateway.logs.filter((l) => l.msg === 'policy reloaded').length
    const settle = () => new Promise((r) => setTimeout(r, 500))
    try {
      writeFileSync(join(dir, 'unrelated.txt'), 'x')
      await settle()
      expect(reloads()).toBe(0)
      version('..v2', rule('/y'))
      await gateway.waitForLog((l) => l.msg === 'policy reloaded')
      expect([(await fetch(`${gateway.url}/y`)).status, (await fetch(`${gateway.url}/y`)).status]).toEqual([
        200, 429,
      ])
      // The same content under a new version: nothing to reload.
      version('..v3', rule('/y'))
      await settle()
      expect(reloads()).toBe(1)
      expect(await gateway.stop()).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })
  test('an invalid edit is rejected once: later events in the folder (a log file there) do not retry it; SIGHUP and a valid edit do', async () => {
    const dir = tempDir()
    const rule = (path: string) =>
      `rules: [{ name: r, match: { path: ${path} }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`
    const file = writePolicy(dir, rule('/x'))
    const gateway = await spawnGateway(['--config', file, '--upstream', origin.url])
    const rejections = () => gateway.logs.filter((l) => l.msg.startsWith('policy rejected')).length
    const settle = () => new Promise((r) => setTimeout(r, 300))
    try {
      writeFileSync(file, 'rules: [{ name: r, algoritm: x }]\n')
      await gateway.waitForLog((l) => l.msg.startsWith('policy rejected'))
      // As a log file in the policy's folder does with every line (each rejection one more).
      for (let i = 0; i < 5; i++) {
        writeFileSync(join(dir, 'gateway.log'), `line ${i}\n`, { flag: 'a' })
        await settle()
      }
      expect(rejections()).toBe(1)
      // An explicit reload still retries the same text.
      gateway.child.kill('SIGHUP')
      for (let i = 0; i < 250 && rejections() < 2; i++) await new Promise((r) => setTimeout(r, 20))
      expect(rejections()).toBe(2)
      writeFileSync(join(dir, 'gateway.log'), 'one more\n', { flag: 'a' })
      await settle()
      expect(rejections()).toBe(2)
      writeFileSync(file, rule('/y'))
      await gateway.waitForLog((l) => l.msg === 'policy reloaded')
      expect([(await fetch(`${gateway.url}/y`)).status, (await fetch(`${gateway.url}/y`)).status]).toEqual([
        200, 429,
      ])
      const metrics = await (await fetch(`${gateway.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_config_reloads_total{result="failure"} 2')
      expect(await gateway.stop()).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })
})

describe('file watching through a symlink to another directory', () => {
  test('an edit of the target, in place or by rename, reloads; so does one after the link moves', async () => {
    const dir = tempDir()
    // A rule named after its path: a reload keeps a rule's counters only under the same name.
    const rule = (path: string) =>
      `rules: [{ name: r${path.slice(1)}, match: { path: ${path} }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }]\n`
    for (const d of ['etc', 'srv1', 'srv2']) mkdirSync(join(dir, d))
    writeFileSync(join(dir, 'srv1', 'real.yaml'), rule('/a'))
    writeFileSync(join(dir, 'srv2', 'other.yaml'), rule('/c'))
    symlinkSync(join(dir, 'srv1', 'real.yaml'), join(dir, 'etc', 'p.yaml'))
    const gateway = await spawnGateway(['--config', join(dir, 'etc', 'p.yaml'), '--upstream', origin.url])
    // The n-th reload: generation 1 is the policy the gateway started with.
    const reloaded = (n: number) =>
      gateway.waitForLog((l) => l.msg === 'policy reloaded' && l.generation === n + 1)
    const limited = async (path: string) => [
      (await fetch(`${gateway.url}${path}`)).status,
      (await fetch(`${gateway.url}${path}`)).status,
    ]
    try {
      // In place, in the target's directory only (the link's directory sees nothing).
      writeFileSync(join(dir, 'srv1', 'real.yaml'), rule('/b'))
      await reloaded(1)
      expect(await limited('/b')).toEqual([200, 429])
      // By rename, as editors save.
      writeFileSync(join(dir, 'srv1', '.real.yaml.swp'), rule('/e'))
      renameSync(join(dir, 'srv1', '.real.yaml.swp'), join(dir, 'srv1', 'real.yaml'))
      await reloaded(2)
      expect(await limited('/e')).toEqual([200, 429])
      // The link now leads to another directory: edits there count, from then on.
      symlinkSync(join(dir, 'srv2', 'other.yaml'), join(dir, 'etc', 'p.tmp'))
      renameSync(join(dir, 'etc', 'p.tmp'), join(dir, 'etc', 'p.yaml'))
      await reloaded(3)
      writeFileSync(join(dir, 'srv2', 'other.yaml'), rule('/d'))
      await reloaded(4)
      expect(await limited('/d')).toEqual([200, 429])
      expect(await gateway.stop()).toBe(0)
    } finally {
      await gateway.stop('SIGKILL')
    }
  })
})

describe('approximate counts on Redis: reload and shutdown', () => {
  let redis: RedisServer
  let client: Redis
  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url)
  })
  afterAll(async () => {
    client?.disconnect()
    await redis?.stop()
  })

  const policy = (url: string, prefix: string, defaults = '') => `
store: { type: redis, url: "${url}", prefix: ${prefix} }
identity: { secret: s }
${defaults}
rules:
  - { name: approx, algorithm: fixed-window, limit: 1000, window: ${WINDOW}, key: global, consistency: approximate, syncInterval: 1m }
`

  /** The count of the one fixed window under `prefix` ("windowIndex:count"), 0 before there is one. */
  async function stored(prefix: string): Promise<number> {
    const keys = await client.keys(`${prefix}:*`)
    expect(keys.length).toBeLessThanOrEqual(1)
    const value = keys[0] === undefined ? null : await client.get(keys[0])
    return value === null ? 0 : Number(value.split(':')[1])
  }

  /** Polls `test` (every 20 ms, 5 s at most): the flush of a retired policy runs after the reload returns. */
  async function eventually(test: () => boolean | Promise<boolean>): Promise<void> {
    for (let i = 0; i < 250 && !(await test()); i++) await new Promise((r) => setTimeout(r, 20))
  }

  async function admit(url: string, n: number): Promise<void> {
    for (let i = 0; i < n; i++) expect((await fetch(`${url}/ok`)).status).toBe(200)
  }

  test('a reload that changes only the store (the same Redis spelled differently) flushes the counts it retires', async () => {
    const gw = await startInProcess(policy(redis.url, 'ar'), { upstream: origin.url })
    try {
      // The first request is the store's (count 1); the next 49 are counted in-process.
      await admit(gw.url, 50)
      expect(await stored('ar')).toBe(1)
      writeFileSync(gw.file, policy(`${redis.url}/0`, 'ar'))
      expect(await gw.gateway.reload()).toMatchObject({ ok: true })
      expect(gw.logs.find((l) => l.msg === 'policy reloaded')).toMatchObject({ storeKept: false })
      await eventually(async () => (await stored('ar')) === 50)
      expect(await stored('ar')).toBe(50)
      expect(gw.logs.filter((l) => l.level >= 40)).toEqual([])
    } finally {
      await gw.close()
    }
  })

  test('a retired flush that fails (its Redis is gone) is logged with its rules', async () => {
    const gone = await startRedis()
    const gw = await startInProcess(policy(gone.url, 'ag'), { upstream: origin.url })
    try {
      await admit(gw.url, 5)
      await gone.stop()
      writeFileSync(gw.file, policy(redis.url, 'ag'))
      expect(await gw.gateway.reload()).toMatchObject({ ok: true })
      const unflushed = () =>
        gw.logs.find((l) => l.msg === 'approximate counts of a retired policy not flushed')
      await eventually(() => unflushed() !== undefined)
      expect(unflushed()).toMatchObject({
        level: 40,
        generation: 1,
        rules: ['approx'],
        err: expect.any(String),
      })
    } finally {
      await gw.close()
      await gone.stop()
    }
  })

  test('SIGTERM with the store hung (timeout: false): the final flush gives up, names the rules, exit 0', async () => {
    const hung = await startRedis()
    const file = writePolicy(tempDir(), policy(hung.url, 'ah', 'defaults: { timeout: false }'))
    const gateway = await spawnGateway([
      '--config',
      file,
      '--upstream',
      origin.url,
      '--drain-timeout',
      '200ms',
    ])
    try {
      await admit(gateway.url, 5)
      // Frozen: it keeps its connections and answers nothing, and no deadline ends the calls.
      hung.pause()
      gateway.child.kill('SIGTERM')
      // Bounded here too, so that a gateway that never exits fails the test instead of hanging it.
      const still = new Promise((r) => setTimeout(() => r('still running'), 15_000).unref())
      expect(await Promise.race([gateway.exited, still])).toBe(0)
      expect(gateway.logs.find((l) => l.msg === 'approximate counts not flushed')).toMatchObject({
        level: 40,
        rules: ['approx'],
      })
      expect(gateway.logs.at(-1)?.msg).toBe('stopped')
    } finally {
      await gateway.stop('SIGKILL')
      hung.resume()
      await hung.stop()
    }
  }, 20_000)
})

describe('close() during a reload', () => {
  test('a reload waiting for its new Redis is abandoned: its connection is closed, nothing is logged after stopped', async () => {
    const first = await startRedis()
    // Paused: it takes the new store's connection but answers nothing, a Redis not up yet.
    const next = await startRedis()
    next.pause()
    const policy = (url: string) => `
store: { type: redis, url: "${url}", prefix: cr }
rules: [{ name: r, algorithm: fixed-window, limit: 10, window: 1m, key: global }]
`
    const gw = await startInProcess(policy(first.url), { upstream: origin.url, storeTimeoutMs: 10_000 })
    try {
      writeFileSync(gw.file, policy(next.url))
      const reloaded = gw.gateway.reload()
      // Long enough for the reload to open the new client (the outcome must not depend on it).
      await new Promise((r) => setTimeout(r, 100))
      // Within the store timeout: a close that waited for the reload's full timeout would fail this.
      const started = performance.now()
      await gw.close()
      expect(performance.now() - started).toBeLessThan(5_000)
      next.resume()
      expect(await reloaded).toMatchObject({ ok: false })
      expect(gw.gateway.generation).toBe(1)
      // Only this probe's own connection is left on the new Redis.
      const clients = async () =>
        String(await redisCommand(next.port, ['CLIENT', 'LIST']))
          .split('\n')
          .filter((line) => line.trim() !== '').length
      for (let i = 0; i < 50 && (await clients()) > 1; i++) await new Promise((r) => setTimeout(r, 20))
      expect(await clients()).toBe(1)
      expect(gw.logs.some((l) => l.msg === 'policy reloaded')).toBe(false)
      expect(gw.logs.at(-1)?.msg).toBe('stopped')
    } finally {
      await gw.close()
      next.resume()
      await first.stop()
      await next.stop()
    }
  }, 20_000)
})

describe('start-up failures', () => {
  test('a store whose client refuses its URL: one clear line, exit 1, no stack trace', async () => {
    const dir = tempDir()
    for (const [store, message] of [
      [
        '{ type: upstash, url: "HTTPS://example.upstash.io", token: t }',
        'store.url: expected a URL as the Upstash client takes it',
      ],
      [
        '"redis://127.0.0.1:1?sentinels=x"',
        'edgelimit: cannot open the redis store: Requires the name of master.',
      ],
    ]) {
      const file = writePolicy(dir, `store: ${store}\nrules: []\n`)
      const result = await runCli([
        'serve',
        '--config',
        file,
        '--upstream',
        origin.url,
        '--port',
        '0',
        '--admin-port',
        '0',
      ])
      expect(result.code).toBe(1)
      expect(result.stderr).toContain(message)
      expect(result.stderr).not.toMatch(/^\s+at /m)
    }
  })

  test('a port in use: exit 1 naming it, and nothing left open (the proxy port is free again)', async () => {
    const taken = createServer()
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r))
    const busy = (taken.address() as AddressInfo).port
    const proxyPort = await freePort()
    const file = writePolicy(tempDir(), 'rules: []\n')
    try {
      // In process: startGateway rejects, having closed the proxy listener it had opened.
      await expect(startInProcess('rules: []\n', { port: proxyPort, adminPort: busy })).rejects.toThrow(
        /EADDRINUSE/,
      )
      await expect(fetch(`http://127.0.0.1:${proxyPort}/`)).rejects.toThrow()
      // As a process, with the demo origin started: it exits instead of serving without admin.
      for (const ports of [
        ['--port', String(proxyPort), '--admin-port', String(busy)],
        ['--port', String(busy), '--admin-port', '0'],
      ]) {
        const result = await runCli(['serve', '--config', file, ...ports], { timeoutMs: 10_000 })
        expect(result.code).toBe(1)
        expect(result.stderr).toContain(`EADDRINUSE: address already in use 127.0.0.1:${busy}`)
      }
    } finally {
      taken.close()
    }
  })
})

function freePort(): Promise<number> {
  const server = createServer()
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    }),
  )
}
