// `edgelimit bench`: every rule (and tier) of a policy driven on the policy's own store, the
// memory store and a real redis-server the test starts. The counts must be what the policy
// admits: an exact sliding log of 3 per hour over 40 fresh keys admits exactly 120 per level.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { freePorts, type RedisServer, redisCommand, startRedis } from '../../edgelimit/test/support/redis.js'
import { startUpstashBridge, type UpstashBridge } from '../../edgelimit/test/support/upstash-bridge.js'
import { LatencyHistogram } from '../src/bench/histogram.js'
import { type BenchReport, runBench } from '../src/bench/index.js'
import { captureIo } from './replay/io.js'
import { runCli } from './support/gateway.js'

const dir = mkdtempSync(path.join(tmpdir(), 'edgelimit-bench-'))
const policy = (name: string, store: string) => {
  const file = path.join(dir, name)
  writeFileSync(
    file,
    `store: ${store}
rules:
  - name: login
    algorithm: sliding-log
    limit: 3
    window: 1h
  - name: api
    key: header:x-api-key
    algorithm: token-bucket
    refillInterval: 1s
    tiers:
      header: x-plan
      default: free
      plans:
        free: { capacity: 5, refillRate: 1 }
        pro: { capacity: 50, refillRate: 10 }
`,
  )
  return file
}

async function bench(args: string[]) {
  const io = captureIo(dir)
  const json = `b-${Math.random().toString(36).slice(2)}.json`
  const code = await runBench([...args, '--json', json], io)
  const report =
    code === 0 || code === 1
      ? (JSON.parse(readFileSync(path.join(dir, json), 'utf8')) as BenchReport)
      : undefined
  return { code, report, out: io.out(), err: io.err() }
}

/** Every level's counts add up, latencies are ordered, and the exact rule admitted exactly. */
function expectConsistent(report: BenchReport, keys: number) {
  for (const r of report.results) {
    expect(r.errors).toBe(0)
    expect(r.storeUnavailable).toBe(0)
    expect(r.admitted + r.denied).toBe(r.decisions)
    expect(r.decisionsPerSecond).toBeCloseTo(r.decisions / r.seconds, 6)
    const { p50, p99, p999, max } = r.latencyUs
    expect(0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max).toBe(true)
    if (r.rule === 'login') {
      // Enough decisions to exhaust every key: then exactly 3 per key, never more.
      expect(r.decisions).toBeGreaterThan(3 * keys)
      expect(r.admitted).toBe(3 * keys)
    }
  }
}

describe('edgelimit bench', () => {
  test('memory store: every rule and every tier at each level, counts exactly what the policy admits', async () => {
    const file = policy('memory.yaml', 'memory')
    const { code, report, out } = await bench([
      '-c',
      file,
      '--duration',
      '150ms',
      '--concurrency',
      '1,8',
      '--keys',
      '40',
    ])
    expect(code).toBe(0)
    expect(report?.store).toBe('memory')
    expect(report?.results.map((r) => `${r.rule}@${r.inFlight}`)).toEqual([
      'login@1',
      'login@8',
      'api.free@1',
      'api.free@8',
      'api.pro@1',
      'api.pro@8',
    ])
    expect(report?.results.map((r) => r.algorithm)).toEqual([
      'sliding-log',
      'sliding-log',
      'token-bucket',
      'token-bucket',
      'token-bucket',
      'token-bucket',
    ])
    expectConsistent(report as BenchReport, 40)
    // A token bucket admits its capacity per key at least (plus what refills during the level).
    for (const r of report?.results.filter((x) => x.rule === 'api.free') ?? [])
      expect(r.admitted).toBeGreaterThanOrEqual(5 * 40)
    expect(out).toMatch(/^rule\s+algorithm\s+in flight\s+decisions\/s\s+p50\s+p99\s+p99\.9\s+max\s+admitted/m)
    expect(out).toMatch(/^login\s+sliding-log\s+8\s+[\d,]+\s+[\d.]+ µs/m)
  })

  test('--rule picks rules; usage errors exit 2 with a message, before any store is opened', async () => {
    const file = policy('pick.yaml', 'memory')
    const picked = await bench(['-c', file, '--rule', 'api', '--duration', '50ms', '--concurrency', '2'])
    expect(picked.code).toBe(0)
    expect(picked.report?.results.map((r) => r.rule)).toEqual(['api.free', 'api.pro'])
    const one = await bench([
      '-c',
      file,
      ...'--rule login --duration 50ms --concurrency 1 --keys 1'.split(' '),
    ])
    expect(one.code).toBe(0)
    expect(one.out).toMatch(/ memory store, 1 key per level, 50 ms per level /)

    const cases: [string[], RegExp][] = [
      [['--rule', 'nope'], /--rule: no rule "nope" in .*pick\.yaml \(rules: login, api\)/],
      [['--concurrency', '1,0'], /--concurrency: expected whole numbers/],
      [['--duration', 'soon'], /--duration: expected a duration like 2s, got "soon"/],
      [['--keys=0'], /--keys: expected a positive whole number/],
      // A Node timer of more than 2^31 - 1 ms fires at once: a store still connecting failed at
      // once with "did not become ready within 2592000000 ms".
      [['--timeout', '25d'], /--timeout: expected at most 24d \(Node's timer limit\), got "25d"/],
      [['--bogus'], /Unknown option '--bogus'/],
    ]
    for (const [args, message] of cases) {
      const r = await bench(['-c', file, ...args])
      expect(r.code).toBe(2)
      expect(r.err).toMatch(message)
    }
    const missing = await bench(['-c', path.join(dir, 'missing.yaml')])
    expect(missing.code).toBe(2)
    expect(missing.err).toMatch(/cannot read the file/)
  })

  test('--concurrency reads decimal digits as the other number flags do: 1e3, 0x10, 2.0 are usage errors', async () => {
    // It parsed with Number(): 1e3 ran 1000 in flight, 0x10 ran 16, where --keys 1e3 is refused.
    const file = policy('levels.yaml', 'memory')
    for (const value of ['1e3', '0x10', '2.0', '1,_2', '+4', '1,,2']) {
      const r = await bench(['-c', file, '--rule', 'login', '--duration', '50ms', '--concurrency', value])
      expect([r.code, r.err]).toEqual([
        2,
        `edgelimit bench: --concurrency: expected whole numbers from 1 to 100000 like 1,16,256, got "${value}"\n`,
      ])
    }
    const grouped = await bench([
      '-c',
      file,
      '--rule',
      'login',
      '--duration',
      '50ms',
      '--concurrency',
      '1_0, 2',
    ])
    expect(grouped.code).toBe(0)
    expect(grouped.report?.results.map((r) => r.inFlight)).toEqual([10, 2])
  })

  test('an output it cannot write (--json under a file): exit 2 before running, not after', async () => {
    const file = policy('out.yaml', 'memory')
    writeFileSync(path.join(dir, 'a-file'), 'x')
    const io = captureIo(dir)
    const code = await runBench(['-c', file, '--duration', '2s', '--json', 'a-file/report.json'], io)
    expect(code).toBe(2)
    expect(io.err()).toMatch(/^edgelimit bench: E(EXIST|NOTDIR): .*a-file/)
    expect(io.out()).toBe('')
  })

  test('a store that never becomes ready: exit 2 within --timeout, no hang', async () => {
    const [port] = await freePorts(1)
    const file = policy('down.yaml', `redis://127.0.0.1:${port}`)
    const t0 = Date.now()
    const { code, err } = await bench(['-c', file, '--timeout', '300ms'])
    expect(code).toBe(2)
    expect(err).toMatch(
      /redis store at redis:\/\/127\.0\.0\.1:\d+: the store did not become ready within 300 ms/,
    )
    expect(Date.now() - t0).toBeLessThan(5000)
  })

  test('a store it cannot reach (Upstash, Redis on a closed loopback port): the CLI exits 2 naming the store and its URL, nothing measured', async () => {
    // Upstash has no connection to wait for: every decision was answered by onStoreError, counted
    // as "store down", and the bench exited 0.
    const [port] = await freePorts(1)
    const cases: [string, RegExp][] = [
      [
        `{ type: upstash, url: "http://127.0.0.1:${port}", token: t0ken }`,
        new RegExp(`^edgelimit bench: upstash store at http://127\\.0\\.0\\.1:${port}: .*ECONNREFUSED.*\n$`),
      ],
      [
        `redis://:secret@127.0.0.1:${port}`,
        new RegExp(
          `^edgelimit bench: redis store at redis://\\*\\*\\*@127\\.0\\.0\\.1:${port}: the store did not become ready within 1000 ms .*\n$`,
        ),
      ],
    ]
    for (const [store, message] of cases) {
      const file = policy(`unreachable-${cases.findIndex((c) => c[0] === store)}.yaml`, store)
      const r = await runCli([
        'bench',
        '-c',
        file,
        '--timeout',
        '1s',
        '--duration',
        '100ms',
        '--concurrency',
        '1',
      ])
      expect([r.code, r.stdout]).toEqual([2, ''])
      expect(r.stderr).toMatch(message)
      expect(r.stderr).not.toMatch(/secret|t0ken/)
    }
  })

  describe('on Upstash (the REST bridge over a real redis-server)', () => {
    let redis: RedisServer
    let bridge: UpstashBridge
    beforeAll(async () => {
      redis = await startRedis()
      bridge = await startUpstashBridge(redis)
    })
    afterAll(async () => {
      await bridge?.close()
      await redis?.stop()
    })

    test('a reachable store is measured; a refused token is exit 2 before any decision', async () => {
      const store = (token: string) =>
        `{ type: upstash, url: "${bridge.url}", token: "${token}", prefix: bu }`
      const ok = await bench([
        '-c',
        policy('upstash.yaml', store(bridge.token)),
        '--rule',
        'login',
        '--duration',
        '300ms',
        '--concurrency',
        '4',
        '--keys',
        '10',
      ])
      expect(ok.code).toBe(0)
      expect(ok.report?.store).toBe('upstash')
      expectConsistent(ok.report as BenchReport, 10)
      const refused = await bench(['-c', policy('upstash-token.yaml', store('wrong')), '--rule', 'login'])
      expect([refused.code, refused.out]).toEqual([2, ''])
      expect(refused.err).toMatch(
        /^edgelimit bench: upstash store at http:\/\/127\.0\.0\.1:\d+: .*Unauthorized/,
      )
    })
  })

  describe('on a real redis-server', () => {
    let redis: RedisServer
    beforeAll(async () => {
      redis = await startRedis()
    })
    afterAll(async () => {
      await redis?.stop()
    })

    test('every decision is a round trip until a key is denied; keys are bench:<run>:… under the prefix', async () => {
      const file = policy('redis.yaml', `{ type: redis, url: "${redis.url}", prefix: bl }`)
      const before = await evalshaCalls(redis.port)
      const { code, report } = await bench([
        '-c',
        file,
        '--rule',
        'login',
        '--duration',
        '500ms',
        '--concurrency',
        '1,16',
        '--keys',
        '10',
      ])
      expect(code).toBe(0)
      expect(report?.store).toBe('redis')
      // 10 keys: 31 round trips in 500 ms exhaust them even when the loaded machine makes each take
      // 15 ms (40 keys in 300 ms once fell one decision short).
      expectConsistent(report as BenchReport, 10)
      // At 1 in flight each of the 30 admissions was its own script call; at 16 in flight the
      // store may carry up to 8 decisions in one call.
      expect((await evalshaCalls(redis.port)) - before).toBeGreaterThanOrEqual(30 + 30 / 8)
      const keys = (await redisCommand(redis.port, ['KEYS', 'bl:login:*'])) as string[]
      expect(keys.length).toBeGreaterThanOrEqual(2 * 10)
      for (const key of keys)
        expect(key).toMatch(/^bl:login:[0-9a-z]+:\{bench:[0-9a-f]{8}:[01]:\d+(:warm)?\}$/)
    })

    test('a store that stops answering under a rule without a timeout: the level ends, the calls count as failed, exit 1', async () => {
      const proxy = await holdingProxy(redis.port)
      try {
        const file = path.join(dir, 'stuck.yaml')
        writeFileSync(
          file,
          `store: redis://127.0.0.1:${proxy.port}
rules:
  - name: stuck
    algorithm: fixed-window
    limit: 10
    window: 1m
    timeout: false
`,
        )
        const t0 = Date.now()
        const { code, report, out } = await bench(['-c', file, '--duration', '200ms', '--concurrency', '4'])
        expect(proxy.held()).toBe(true)
        expect(code).toBe(1)
        expect(report?.results[0]?.errors).toBe(4)
        expect(out).toMatch(/stuck at 4 in flight: 4 decisions failed: no answer 1 s after the level ended/)
        expect(Date.now() - t0).toBeLessThan(10_000)
      } finally {
        await proxy.close()
      }
    })

    test.each(['open', 'closed', 'local'])(
      "a store that stops answering mid-run under onStoreError %s: figures flagged as not the store's, exit 1",
      async (mode) => {
        const proxy = await holdingProxy(redis.port)
        try {
          const file = path.join(dir, `degraded-${mode}.yaml`)
          writeFileSync(
            file,
            `store: redis://127.0.0.1:${proxy.port}
rules:
  - name: degraded
    algorithm: fixed-window
    limit: 10
    window: 1m
    timeout: 20ms
    onStoreError: ${mode}
`,
          )
          const { code, report, out } = await bench(['-c', file, '--duration', '200ms', '--concurrency', '2'])
          expect(proxy.held()).toBe(true)
          const result = report?.results[0]
          expect(result?.errors).toBe(0)
          expect(result?.storeUnavailable).toBeGreaterThan(0)
          expect(out).toContain(
            `degraded at 2 in flight: ${result?.storeUnavailable.toLocaleString('en-US')} of ${result?.decisions.toLocaleString('en-US')} decisions were answered without the store (onStoreError: ${mode}): these figures are not the store's`,
          )
          expect(code).toBe(1)
        } finally {
          await proxy.close()
        }
      },
    )
  })
})

/**
 * A TCP proxy to Redis that forwards until the client sends its first script call, and from then
 * on forwards nothing: a store that accepted the connection and stopped answering.
 */
async function holdingProxy(
  port: number,
): Promise<{ port: number; held(): boolean; close(): Promise<void> }> {
  let held = false
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => {})
    }
    client.on('data', (chunk) => {
      if (/evalsha|eval/i.test(chunk.toString('latin1'))) held = true
      if (!held) upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (!held) client.write(chunk)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    held: () => held,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

async function evalshaCalls(port: number): Promise<number> {
  const info = String(await redisCommand(port, ['INFO', 'commandstats']))
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0)
}

describe('LatencyHistogram', () => {
  test('quantiles within 1 % of the exact ones, never below; max exact', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.02, max: 5e6, noNaN: true }), { minLength: 1, maxLength: 400 }),
        fc.constantFrom(0.5, 0.9, 0.99, 0.999, 1),
        (values, q) => {
          const h = new LatencyHistogram()
          for (const v of values) h.record(v)
          const sorted = [...values].sort((a, b) => a - b)
          const exact = sorted[Math.max(1, Math.ceil(q * values.length)) - 1] as number
          const got = h.quantile(q)
          expect(got).toBeGreaterThanOrEqual(exact * (1 - 1e-12))
          expect(got).toBeLessThanOrEqual(exact * 1.01 * (1 + 1e-12))
          expect(h.max).toBe(sorted[sorted.length - 1])
          expect(h.count).toBe(values.length)
        },
      ),
    )
  })

  test('empty: zeros; below the floor and non-finite values count at the floor', () => {
    const h = new LatencyHistogram()
    expect([h.quantile(0.5), h.max, h.count]).toEqual([0, 0, 0])
    h.record(0)
    h.record(Number.NaN)
    expect(h.count).toBe(2)
    expect(h.quantile(1)).toBeCloseTo(0.01, 10)
  })
})
