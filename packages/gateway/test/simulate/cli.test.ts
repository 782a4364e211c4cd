import { linkSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { gzipSync } from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { runBench } from '../../src/bench/index.js'
import { runReplay } from '../../src/replay/index.js'
import {
  MAX_SCENARIO_REQUESTS,
  runSimulate,
  SCENARIOS,
  type Scenario,
  type SimulationResult,
  scenarioByName,
} from '../../src/simulate/index.js'
import { clfTime } from '../replay/generate-log.js'
import { captureIo } from '../replay/io.js'
import { runCli } from '../support/gateway.js'

const SAMPLE = path.resolve(__dirname, '../../../../../shared/data/apache_access_sample.log')
const dir = mkdtempSync(path.join(tmpdir(), 'edgelimit-simulate-'))
const file = (name: string, content: string) => {
  const f = path.join(dir, name)
  writeFileSync(f, content)
  return f
}

async function simulateJson(
  args: string[],
): Promise<{ code: number; results: SimulationResult[]; out: string; err: string }> {
  const io = captureIo(dir)
  const json = `r-${Math.random().toString(36).slice(2)}.json`
  const code = await runSimulate([...args, '--no-html', '--json', json], io)
  const results =
    code === 0 ? (JSON.parse(readFileSync(path.join(dir, json), 'utf8')) as SimulationResult[]) : []
  return { code, results, out: io.out(), err: io.err() }
}

/** `simulate --trace <trace>` with one fixed window of 2 per second. */
function twoPerSecond(trace: string) {
  return simulateJson(['--trace', trace, '--limit', '2', '--window', '1s', '--algorithms', 'fixed-window'])
}

describe('edgelimit simulate', () => {
  test('a table per algorithm, and an HTML report with uPlot inlined (no network)', async () => {
    const io = captureIo(dir)
    expect(await runSimulate(['boundary-burst', '--html', 'sim.html'], io)).toBe(0)
    const out = io.out()
    expect(out).toContain('boundary-burst: 2,300 requests from 6 clients over 10 m; limit 100 per 1 m')
    expect(out).toMatch(/fixed window\s+2,300\s+0\s+200 \/ 100\s+2\.00×\s+0\s+400 \(17\.4 %\)\s+—/)
    expect(out).toMatch(/sliding log \(exact\)\s+1,900\s+400\s+100 \/ 100\s+1\.00×\s+0\s+0\s+2 m/)
    const html = readFileSync(path.join(dir, 'sim.html'), 'utf8')
    expect(html).toContain('var uPlot=')
    expect(html).toContain("default-src 'none'")
    expect(html).not.toMatch(/(src|href)="https?:/)
  })

  test('--limit and --window reshape the scenario and every algorithm; --algorithms picks a subset', async () => {
    const { results } = await simulateJson([
      'boundary-burst',
      '--limit',
      '20',
      '--window',
      '10s',
      '--algorithms',
      'fixed-window,sliding-log',
    ])
    const [r] = results
    expect(r?.algorithms.map((a) => a.id)).toEqual(['fixed-window', 'sliding-log'])
    expect([r?.limit, r?.windowMs]).toEqual([20, 10_000])
    expect(r?.algorithms.map((a) => a.maxInSpan.count)).toEqual([40, 20])
  })

  test('a policy file: its rules instead of the algorithms; a global rule sees the botnet', async () => {
    const policy = file(
      'policy.yaml',
      `rules:
  - { name: per-ip, algorithm: sliding-window, limit: 100, window: 1m }
  - { name: search-global, match: { path: /api/search }, key: global, algorithm: gcra, limit: 20000, period: 1m }
`,
    )
    const { code, results } = await simulateJson(['botnet', '--config', policy])
    expect(code).toBe(0)
    const [perIp, global] = results[0]?.algorithms ?? []
    expect(perIp?.denied).toBe(0)
    // 50,000 requests a minute for 3 minutes against 20,000 a minute (bursts of 20,000): ~80,000 pass.
    expect(global?.label).toBe('search-global')
    expect(global?.admitted).toBe(79_997)
    expect(global?.maxInSpan.key).toBe('*')
  })

  test('--trace: an access log is read as replay reads it: an absolute-form target by its path and host, a request serve refuses before its rules skipped', async () => {
    const at = (i: number) => clfTime(Date.UTC(2026, 0, 1, 0, 0, i))
    const line = (i: number, request: string) => `203.0.113.${i} - - [${at(i)}] "${request}" 200 1 "-" "ua"`
    const trace = file(
      'proxy.log',
      `${[
        line(1, 'GET http://API.example.com/login HTTP/1.1'),
        line(2, 'GET http://api.example.com/login?x=1 HTTP/1.1'),
        line(3, 'CONNECT api.example.com:443 HTTP/1.1'),
        line(4, 'GET /%zz HTTP/1.1'),
        line(5, 'OPTIONS * HTTP/1.1'),
      ].join('\n')}\n`,
    )
    const policy = file(
      'host-login.yaml',
      'rules:\n  - { name: login, match: { host: api.example.com, path: /login }, key: global, algorithm: fixed-window, limit: 1, window: 1m }\n',
    )
    const { code, results, err } = await simulateJson(['--trace', trace, '--config', policy])
    expect(code, err).toBe(0)
    const [login] = results[0]?.algorithms ?? []
    expect([login?.admitted, login?.denied]).toEqual([1, 1])
    expect(err).toContain(
      '3 malformed lines skipped: line 3: CONNECT (the gateway answers 405 before its rules)',
    )
  })

  test('GCRA is measured against its burst and the time to refill it, as the token bucket it equals', async () => {
    // 20 requests at once, then one every 50 ms: GCRA 2/s with bursts of 20 and a token bucket of
    // 20 refilled at 2/s admit and deny the same requests, so they must score the same.
    const trace = file(
      'burst.csv',
      `time,key\n${Array.from({ length: 40 }, (_, i) => `${i < 20 ? 0 : (i - 19) * 50},alice`).join('\n')}\n`,
    )
    const policy = file(
      'gcra-burst.yaml',
      `rules:
  - { name: g, algorithm: gcra, limit: 2, period: 1s, burst: 20 }
  - { name: tb, algorithm: token-bucket, capacity: 20, refillRate: 2 }
`,
    )
    const { code, results } = await simulateJson(['--trace', trace, '--config', policy])
    expect(code).toBe(0)
    const [g, tb] = results[0]?.algorithms ?? []
    expect([g?.admitted, g?.denied]).toEqual([tb?.admitted, tb?.denied])
    expect(g?.admitted).toBe(22)
    expect([g?.limit, g?.windowMs]).toEqual([20, 10_000])
    const score = (a: typeof g) => [a?.maxInSpan.count, a?.falseBlocks, a?.misses]
    expect(score(g)).toEqual(score(tb))
    expect(g?.maxInSpan.count).toBe(22)
  })

  test('--trace: a JSON line whose cost is not a whole number from 1 is skipped and reported, as a time,key,cost line is', async () => {
    // It was taken as cost 1: a cost of 1e400 or 2^53 + 1 admitted under a limit of 2.
    const lines = ['{"t":0,"key":"a","cost":1e400}', '{"t":1,"key":"a","cost":9007199254740993}']
    lines.push('{"t":2,"key":"a","cost":0}', '{"t":3,"key":"a","cost":-2}', '{"t":4,"key":"a","cost":1.5}')
    lines.push('{"t":5,"key":"a","cost":"2"}', '{"t":6,"key":"a","cost":3}', '{"t":7,"key":"a"}')
    const trace = file('costs.jsonl', `${lines.join('\n')}\n`)
    const r = await simulateJson(['--trace', trace, '--limit', '2', '--algorithms', 'fixed-window'])
    expect(r.err).toContain(
      '6 malformed lines skipped: line 1: bad cost 1e400; line 2: bad cost 9007199254740993; line 3: bad cost 0; line 4: bad cost -2; line 5: bad cost 1.5; line 6: bad cost "2"',
    )
    // Cost 3 (more than the limit) is denied; the line without a cost costs 1.
    expect(r.results[0]?.algorithms[0]).toMatchObject({ admitted: 1, denied: 1 })
  })

  test('--trace: a negative or non-finite time is a bad time, skipped and reported, in JSON and time,key lines', async () => {
    // {"t":-1000} was read as an epoch 1000 s before 1970 (a trace 16 m 41 s long), and a first
    // time,key line of -1000 was taken for a header and dropped without a word.
    const json = ['{"t":-1000,"key":"a"}', '{"t":1e400,"key":"a"}', '{"t":-0.5,"key":"a"}']
    json.push('{"t":"yesterday","key":"a"}', '{"t":0,"key":"a"}', '{"t":500,"key":"b"}')
    const j = await twoPerSecond(file('negative.jsonl', `${json.join('\n')}\n`))
    expect(j.err).toContain(
      '4 malformed lines skipped: line 1: bad time -1000; line 2: bad time 1e400; line 3: bad time -0.5; line 4: bad time "yesterday"',
    )
    expect(j.results[0]).toMatchObject({ requests: 2, durationMs: 501 })
    const csv = await twoPerSecond(file('negative.csv', '-1000,a\n0,a\n-1,b\n500,b\n'))
    expect(csv.err).toContain('2 malformed lines skipped: line 1: bad time "-1000"; line 3: bad time "-1"')
    expect(csv.results[0]).toMatchObject({ requests: 2, durationMs: 501 })
  })

  test('--trace: an empty key is a malformed line, skipped and reported, in JSON and time,key lines', async () => {
    // {"key":""} and `0,` were one client of key "", and `0,,1` a request of client "1".
    const json = ['{"t":0,"key":""}', '{"t":1,"ip":""}', '{"t":2,"key":"","ip":"b"}', '{"t":3,"key":"a"}']
    const j = await twoPerSecond(file('empty-key.jsonl', `${json.join('\n')}\n`))
    expect(j.err).toContain('2 malformed lines skipped: line 1: empty key; line 2: empty key\n')
    // An empty key falls back to ip, as replay takes the first field present.
    expect(j.results[0]).toMatchObject({ requests: 2, clients: 2, durationMs: 2 })
    const csv = await twoPerSecond(file('empty-key.csv', 'time,key\n0,\n0,,1\n0 , \n1,a\n2 , b\n3\t\tc\n'))
    expect(csv.err).toContain(
      '3 malformed lines skipped: line 2: empty key; line 3: empty key; line 4: empty key\n',
    )
    expect(csv.results[0]).toMatchObject({ requests: 3, clients: 3, durationMs: 3 })
  })

  test('--trace: one request, one client and one malformed line are written in the singular', async () => {
    // "1 requests from 1 clients" and "1 malformed lines skipped".
    const io = captureIo(dir)
    const trace = file('one.csv', '0,alice\nnot-a-time,x\n')
    expect(await runSimulate(['--trace', trace, '--algorithms', 'fixed-window', '--no-html'], io)).toBe(0)
    expect(io.out()).toMatch(
      /^one\.csv: 1 request from 1 client over 1 ms; limit 100 per 1 m\n1 request from one\.csv, in time order\n/,
    )
    expect(io.err()).toBe(
      `${trace}: 1 malformed line skipped: line 2: expected an access log line, a JSON object, or time,key[,cost]\n`,
    )
  })

  test('--trace: a byte order mark opening the file is not part of its first line (which was dropped as a header)', async () => {
    for (const [name, content] of [
      ['bom.csv', '0,alice\n500,alice\n900,alice\n'],
      ['bom.jsonl', '{"t": 0, "key": "alice"}\n{"t": 500, "key": "alice"}\n{"t": 900, "key": "alice"}\n'],
    ] as const) {
      const { code, results } = await twoPerSecond(file(name, `\uFEFF${content}`))
      expect([name, code, results[0]?.requests]).toEqual([name, 0, 3])
      expect(results[0]?.algorithms[0]?.denied).toBe(1)
    }
  })

  test('--trace: an access log, JSON lines, and time,key[,cost] lines', async () => {
    const log = await simulateJson([
      '--trace',
      SAMPLE,
      '--limit',
      '60',
      '--algorithms',
      'sliding-log,fixed-window',
    ])
    expect(log.results[0]?.requests).toBe(10_000)
    expect(log.results[0]?.clients).toBe(1753)
    expect(log.results[0]?.algorithms[0]?.denied).toBe(87)
    const csv = file(
      'trace.csv',
      'time,key,cost\n0,alice\n10,alice,2\n20,bob\nnot-a-time,x\n30,alice,3\n40,bob,\x1b[2J\n',
    )
    const c = await simulateJson([
      '--trace',
      csv,
      '--limit',
      '4',
      '--window',
      '1s',
      '--algorithms',
      'sliding-log',
    ])
    // A bad value is quoted with its control characters escaped (nothing reaches the terminal raw).
    expect(c.err).toContain('2 malformed lines skipped: line 5: expected an access log line')
    expect(c.err).toContain('line 7: bad cost "\\u001b[2J"')
    expect(c.results[0]?.algorithms[0]).toMatchObject({ admitted: 3, denied: 1 })
    const jsonl = file(
      'trace.jsonl',
      ['{"t":0,"key":"a"}', '{"t":"1970-01-01T00:00:00.500Z","key":"a","cost":2}', '{"t":900,"ip":"b"}'].join(
        '\n',
      ),
    )
    const j = await twoPerSecond(jsonl)
    expect(j.results[0]?.algorithms[0]).toMatchObject({ admitted: 2, denied: 1 })
    // An access log line of a connection that sent no request (`"-" 408`) is no request either.
    const at = (s: number, request: string) =>
      `10.0.0.1 - - [${clfTime(Date.UTC(2026, 0, 1) + s * 100)}] "${request}" 200 5\n`
    const preconnects = file(
      'preconnect.log',
      `${at(0, 'GET / HTTP/1.1')}${at(1, '-')}${at(2, '-')}${at(3, 'GET / HTTP/1.1')}`,
    )
    const p = await simulateJson([
      '--trace',
      preconnects,
      '--limit',
      '2',
      '--window',
      '1s',
      '--algorithms',
      'sliding-log',
    ])
    expect(p.results[0]?.requests).toBe(2)
    expect(p.results[0]?.algorithms[0]).toMatchObject({ admitted: 2, denied: 0 })
    expect(p.err).toContain(
      '2 malformed lines skipped: line 2: no request ("-" or "": the connection sent none)',
    )
  })

  test('--trace with --config: rules read the user agent and query of an access log; a field the trace lacks is warned about', async () => {
    // One address, two user agents, 10 requests each within a minute; the bot's all to ?q=x.
    const lines = Array.from({ length: 20 }, (_, i) => {
      const bot = i % 2 === 1
      const target = bot ? '/search?q=x' : `/search?q=${i}`
      return `10.0.0.1 - - [${clfTime(Date.UTC(2026, 0, 1) + i * 1000)}] "GET ${target} HTTP/1.1" 200 5 "-" "${bot ? 'bot/1' : 'curl/8'}"`
    })
    const log = file('agents.log', `${lines.join('\n')}\n`)
    const policy = file(
      'by-agent.yaml',
      `rules:
  - { name: by-ua, key: header:user-agent, algorithm: fixed-window, limit: 10, window: 1m }
  - { name: by-ip, key: ip, algorithm: fixed-window, limit: 10, window: 1m }
  - { name: by-q, key: "query:q", algorithm: fixed-window, limit: 5, window: 1m }
  - { name: by-tenant, key: "header:x-tenant", algorithm: fixed-window, limit: 10, window: 1m }
`,
    )
    const { code, results, err } = await simulateJson(['--trace', log, '--config', policy])
    expect(code).toBe(0)
    const [ua, ip, q, tenant] = results[0]?.algorithms ?? []
    // Each agent sent 10: none over its own limit, keyed by the agent (not by the address).
    expect(ua).toMatchObject({ admitted: 20, denied: 0 })
    expect(['curl/8', 'bot/1']).toContain(ua?.maxInSpan.key)
    expect(ip).toMatchObject({ admitted: 10, denied: 10 })
    expect(q).toMatchObject({ admitted: 15, denied: 5 })
    expect(q?.maxInSpan.key).toBe('x')
    // No access log line carries X-Tenant: that rule falls back to the address, and says so.
    expect(tenant).toMatchObject({ admitted: 10, denied: 10 })
    expect(err).toMatch(/by-tenant: reads header:x-tenant, which the trace does not carry/)
    expect(err).not.toMatch(/by-ua|by-q/)

    // A time,key trace carries neither: both rules are warned about.
    const csv = file('plain.csv', 'time,key\n0,alice\n10,bob\n')
    const plain = await simulateJson(['--trace', csv, '--config', policy])
    expect(plain.code).toBe(0)
    expect(plain.err).toMatch(/by-ua: reads header:user-agent, which the trace does not carry/)
    expect(plain.err).toMatch(/by-q: reads query:q, which the trace does not carry/)
  })

  test('a trace time means the same in JSON and delimited lines: small numbers are ms from the start, 10 digits epoch seconds, 13 ms, 16 µs, 19 ns', async () => {
    const args = ['--limit', '5', '--window', '1s', '--algorithms', 'sliding-log']
    const run = async (name: string, lines: string[]) => {
      const r = await simulateJson(['--trace', file(name, lines.join('\n')), ...args])
      expect(r.code, r.err).toBe(0)
      const a = r.results[0]?.algorithms[0]
      return [r.results[0]?.durationMs, a?.admitted, a?.denied]
    }
    const times = Array.from({ length: 10 }, (_, i) => i * 10)
    // 10 requests 10 ms apart: within one second, 5 admitted. JSON read them as seconds before.
    const ms = [91, 5, 5] // the span, last time included
    expect(
      await run(
        'ms.jsonl',
        times.map((t) => `{"t":${t},"key":"alice"}`),
      ),
    ).toEqual(ms)
    expect(
      await run(
        'ms.csv',
        times.map((t) => `${t},alice`),
      ),
    ).toEqual(ms)
    // 10 requests 10 s apart as epoch seconds: all admitted. CSV read them as ms before.
    const epoch = times.map((t) => 1_431_856_800 + t)
    const seconds = [90_001, 10, 0]
    expect(
      await run(
        's.jsonl',
        epoch.map((t) => `{"t":${t},"key":"alice"}`),
      ),
    ).toEqual(seconds)
    expect(
      await run(
        's.csv',
        epoch.map((t) => `${t},alice`),
      ),
    ).toEqual(seconds)
    expect(
      await run(
        'epoch-ms.csv',
        epoch.map((t) => `${t * 1000},alice`),
      ),
    ).toEqual(seconds)
    // Microseconds (16 digits) and nanoseconds (19: past 2^53, read from the digits as written),
    // in JSON numbers and delimited lines alike.
    for (const [unit, zeros] of [
      ['us', '000000'],
      ['ns', '000000000'],
    ]) {
      expect(
        await run(
          `${unit}.jsonl`,
          epoch.map((t) => `{"ts":${t}${zeros},"key":"alice"}`),
        ),
      ).toEqual(seconds)
      expect(
        await run(
          `${unit}.csv`,
          epoch.map((t) => `${t}${zeros},alice`),
        ),
      ).toEqual(seconds)
    }
    // 1 ns short of the next second is still in this one (JSON.parse's double is the next second):
    // a span of 9 s 999 ms, the last time included.
    const last = `${(epoch.at(-1) as number) - 1}999999999`
    const short = [
      ...epoch.slice(0, -1).map((t) => `{"ts":${t}000000000,"key":"alice"}`),
      `{"ts":${last},"key":"alice"}`,
    ]
    expect(await run('ns-short.jsonl', short)).toEqual([90_000, 10, 0])
  })

  test('a trace from standard input (-), as replay reads one', async () => {
    const lines = Array.from({ length: 10 }, (_, i) => `${i * 10},alice`).join('\n')
    const r = await runCli(['simulate', '--trace', '-', '--limit', '5', '--window', '1s', '--no-html'], {
      stdin: lines,
    })
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^standard input: 10 requests from 1 clients? over 91 ms/m)
  })

  test('a corrupt gzip input or an output that cannot be written is an input error (exit 2), naming the file', async () => {
    const whole = gzipSync(Buffer.from(Array.from({ length: 2_000 }, (_, i) => `${i},k${i % 7}`).join('\n')))
    const truncated = file('trunc.csv.gz', '')
    writeFileSync(truncated, whole.subarray(0, 100))
    const io = captureIo(dir)
    expect(await runSimulate(['--trace', truncated, '--no-html'], io)).toBe(2)
    expect(io.err()).toMatch(/^edgelimit simulate: .*trunc\.csv\.gz: not a valid gzip stream after line \d+/)
    const replayIo = captureIo(dir)
    expect(await runReplay([truncated, '--no-html', '--no-progress'], replayIo)).toBe(2)
    expect(replayIo.err()).toMatch(/^edgelimit replay: .*trunc\.csv\.gz: not a valid gzip stream/)
    // /dev/full refuses every write with ENOSPC.
    const full = captureIo(dir)
    expect(await runSimulate(['boundary-burst', '--no-html', '--json', '/dev/full'], full)).toBe(2)
    expect(full.err()).toMatch(/^edgelimit simulate: cannot write \/dev\/full: ENOSPC/)
  })

  test('an output in a folder that cannot be made (/proc/x, where Node 20 mkdir -p spins for ever): exit 2, naming the file', async () => {
    const log = file('one.log', '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2\n')
    const policy = file(
      'mem.yaml',
      'store: memory\nrules:\n  - { name: r, algorithm: gcra, limit: 5, period: 1s }\n',
    )
    for (const [args, file] of [
      [['simulate', 'steady', '--html', '/proc/edgelimit-x/s.html'], '/proc/edgelimit-x/s.html'],
      [['replay', log, '--no-progress', '--html', '/proc/edgelimit-x/r.html'], '/proc/edgelimit-x/r.html'],
      [
        ['bench', '-c', policy, '--duration', '100ms', '--json', '/proc/edgelimit-x/y/b.json'],
        '/proc/edgelimit-x/y/b.json',
      ],
    ] as const) {
      const r = await runCli(args, { timeoutMs: 10_000 })
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(2)
      expect(r.stderr).toMatch(new RegExp(`^edgelimit ${args[0]}: cannot write ${file}: ENOENT`, 'm'))
    }
  })

  test('a report over a file the command reads (by any path or link) or over its other report: exit 2 before the run, the input untouched', async () => {
    const logText = '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2\n'
    const log = file('input.log', logText)
    const policyText = 'store: memory\nrules:\n  - { name: r, algorithm: gcra, limit: 5, period: 1s }\n'
    const policy = file('input.yaml', policyText)
    const traceText = 'time,key\n0,a\n10,b\n'
    const trace = file('input.csv', traceText)
    const linked = path.join(dir, `linked-${Math.random().toString(36).slice(2)}.log`)
    symlinkSync(log, linked)
    const hard = path.join(dir, `hard-${Math.random().toString(36).slice(2)}.yaml`)
    linkSync(policy, hard)
    const other = path.join(dir, 'sub', '..', 'input.csv')
    const fresh = path.join(dir, `fresh-${Math.random().toString(36).slice(2)}.out`)
    for (const [run, args, message] of [
      [runReplay, [log, '--no-progress', '--html', log], `--html ${log} is the log this command reads`],
      [runReplay, [log, '--no-progress', '--no-html', '--json', linked], `--json ${linked} is the log`],
      [runReplay, [log, '--no-progress', '-c', policy, '--html', hard], `--html ${hard} is the policy`],
      [
        runReplay,
        [log, '--no-progress', '--html', fresh, '--json', fresh],
        `--json and --html are the same file (${fresh})`,
      ],
      [runSimulate, ['--trace', trace, '--html', other], `--html ${path.resolve(other)} is the trace`],
      [
        runSimulate,
        ['steady', '-c', policy, '--no-html', '--json', policy],
        `--json ${policy} is the policy`,
      ],
      [runBench, ['-c', policy, '--duration', '100ms', '--json', hard], `--json ${hard} is the policy`],
    ] as const) {
      const io = captureIo(dir)
      expect(await run([...args], io), `${args.join(' ')}: ${io.err()}`).toBe(2)
      expect(io.err()).toContain(
        `edgelimit ${run === runReplay ? 'replay' : run === runSimulate ? 'simulate' : 'bench'}: ${message}`,
      )
      // Stopped before the run: no table, and nothing overwritten.
      expect(io.out()).toBe('')
    }
    expect(readFileSync(log, 'utf8')).toBe(logText)
    expect(readFileSync(policy, 'utf8')).toBe(policyText)
    expect(readFileSync(trace, 'utf8')).toBe(traceText)
  })

  test('--json - and --html - write to standard output, the table then to standard error; two on it: exit 2', async () => {
    const log = file('piped.log', '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2\n')
    const policy = file(
      'piped.yaml',
      'store: memory\nrules:\n  - { name: r, algorithm: gcra, limit: 5, period: 1s }\n',
    )
    const before = new Set(readdirSync(dir))
    for (const [run, args, table] of [
      [runSimulate, ['steady', '--no-html', '--json', '-'], 'fixed window'],
      [runReplay, [log, '--no-progress', '--no-html', '--json', '-'], 'would'],
      [runBench, ['-c', policy, '--duration', '50ms', '--concurrency', '1', '--json', '-'], 'decisions/s'],
    ] as const) {
      const io = captureIo(dir)
      expect(await run([...args], io), `${args.join(' ')}: ${io.err()}`).toBe(0)
      // Standard output is the JSON alone, the same as --json <file> writes.
      expect(JSON.parse(io.out())).toBeTypeOf('object')
      expect(io.err()).toContain(table)
    }
    const html = captureIo(dir)
    expect(await runSimulate(['steady', '--html', '-'], html)).toBe(0)
    expect(html.out()).toMatch(/^<!doctype html>/i)
    expect(html.out()).toMatch(/<\/html>\s*$/)
    expect(html.err()).toContain('fixed window')
    expect(html.err()).not.toContain('HTML report:')
    // No file named "-" (or anything else) was made.
    expect(readdirSync(dir).filter((f) => !before.has(f))).toEqual([])
    for (const [run, args] of [
      [runSimulate, ['steady', '--html', '-', '--json', '-']],
      [runReplay, [log, '--no-progress', '--html', '-', '--json', '-']],
    ] as const) {
      const io = captureIo(dir)
      expect(await run([...args], io)).toBe(2)
      expect(io.err()).toMatch(/only one output can go to standard output \(--html -, --json -\)/)
      expect(io.out()).toBe('')
    }
  })

  test('an output that cannot be written stops replay and simulate before their tables, not after', async () => {
    const log = file('one-more.log', '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2\n')
    for (const [run, args] of [
      [runReplay, [log, '--no-progress', '--html', dir]],
      [runReplay, [log, '--no-progress', '--no-html', '--json', '/proc/edgelimit-x/r.json']],
      [runSimulate, ['steady', '--html', dir]],
      [runSimulate, ['steady', '--no-html', '--json', '/proc/edgelimit-x/s.json']],
    ] as const) {
      const io = captureIo(dir)
      expect(await run([...args], io)).toBe(2)
      // A directory given as the file is named by its flag, with a file name to give instead.
      expect(io.err()).toMatch(
        /^edgelimit (replay|simulate): (--html \S+ is a directory: give a file name \(--html \S+\/report\.html\)|cannot write)/,
      )
      expect(io.out()).toBe('')
    }
  })

  test('--algorithms names what it does not know, an empty name among them, quoted', async () => {
    const known = 'fixed-window, sliding-log, sliding-window, token-bucket, leaky-police, leaky-shape, gcra'
    for (const [value, named] of [
      [',,', '"", "", ""'],
      ['gcra,', '""'],
      ['gcra,tokenbucket', '"tokenbucket"'],
    ]) {
      const io = captureIo(dir)
      expect(await runSimulate(['steady', '--no-html', '--algorithms', value as string], io)).toBe(2)
      expect(io.err()).toBe(`edgelimit simulate: --algorithms: unknown ${named} (known: ${known})\n`)
    }
  })

  test("--limit: at most 2147483647 (the limiter's bound), and no more than the scenario traffic that can be built", async () => {
    const trace = file('small.csv', 'time,key\n0,a\n10,b\n')
    const run = async (args: string[]) => {
      const io = captureIo(dir)
      return { code: await runSimulate([...args, '--no-html'], io), err: io.err() }
    }
    for (const limit of ['2147483648', '3000000000', '9007199254740991']) {
      expect(await run(['--trace', trace, '--limit', limit])).toEqual({
        code: 2,
        err: `edgelimit simulate: --limit: expected a positive whole number up to 2147483647, got "${limit}"\n`,
      })
    }
    // Built traffic grows with the limit: refused before it is built, naming the most that works.
    const big = await run(['boundary-burst', '--limit', '1000000'])
    expect(big.code).toBe(2)
    expect(big.err).toMatch(
      /^edgelimit simulate: --limit 1000000: the boundary-burst scenario would be about 23,000,000 requests, more than the 5,000,000 simulate builds; --limit (\d+) is the most that works\n$/,
    )
    const most = Number(/--limit (\d+) is the most/.exec(big.err)?.[1])
    const burst = scenarioByName('boundary-burst') as Scenario
    expect(burst.size({ limit: most })).toBeLessThanOrEqual(MAX_SCENARIO_REQUESTS)
    expect(burst.size({ limit: most + 1 })).toBeGreaterThan(MAX_SCENARIO_REQUESTS)
    // Every scenario given is checked up front; the most that works is the one for all of them.
    const all = await run(['--limit', '2147483647'])
    expect(all.code).toBe(2)
    const allMost = Number(/--limit (\d+) is the most/.exec(all.err)?.[1])
    expect(Math.max(...SCENARIOS.map((s) => s.size({ limit: allMost })))).toBeLessThanOrEqual(
      MAX_SCENARIO_REQUESTS,
    )
    expect(Math.max(...SCENARIOS.map((s) => s.size({ limit: allMost + 1 })))).toBeGreaterThan(
      MAX_SCENARIO_REQUESTS,
    )
    expect(all.err).toContain('the botnet scenario would be about')
    expect(all.err).toContain('works for these scenarios')
    // A smaller window does not make the traffic smaller: --window is taken into account.
    expect((await run(['bursty', '--limit', '100000', '--window', '1s'])).code).toBe(2)
  })

  test('a scenario that yields no requests is a usage error naming the smallest window that yields any', async () => {
    // bursty's 50 browsers start within its first 10 s and it lasts 10 windows: with --window 1ms
    // no request, and simulate printed an empty scoring table and exited 0.
    const run = async (args: string[]) => {
      const io = captureIo(dir)
      return [await runSimulate([...args, '--no-html'], io), io.out(), io.err()]
    }
    expect(await run(['bursty', '--window', '1ms'])).toEqual([
      2,
      '',
      'edgelimit simulate: bursty with --window 1ms yields no requests, nothing to simulate; the smallest window that yields any is 3ms (for seed 1)\n',
    ])
    // One scenario of several: nothing is simulated or written.
    const all = await run(['all', '--window', '2ms', '--seed', '7'])
    expect(all[0]).toBe(2)
    expect(all[2]).toMatch(
      /^edgelimit simulate: bursty with --window 2ms yields no requests, nothing to simulate; the smallest window that yields any is \d+ms \(for seed 7\)\n$/,
    )
    const smallest = /(\d+)ms \(for seed 7\)/.exec(String(all[2]))?.[1]
    const ok = await simulateJson(['bursty', '--window', `${smallest}ms`, '--seed', '7'])
    expect(ok.code).toBe(0)
    expect(ok.results[0]?.requests).toBeGreaterThan(0)
    const below = await run(['bursty', '--window', `${Number(smallest) - 1}ms`, '--seed', '7'])
    expect(below[0]).toBe(2)
  })

  test('usage errors exit 2; --help and --list exit 0', async () => {
    const cases: [string[], RegExp][] = [
      [['nosuch'], /unknown scenario "nosuch"/],
      [['--algorithms', 'magic'], /--algorithms: unknown "magic"/],
      [['--window', 'soon'], /--window: expected a duration/],
      [['--limit', '0'], /--limit: expected a positive whole number/],
      [['--limit', '1e3'], /--limit: expected a positive whole number up to 2147483647, got "1e3"/],
      [['--seed', '0x10'], /--seed: expected a positive whole number, got "0x10"/],
      [['--trace', path.join(dir, 'missing.csv')], /ENOENT/],
      [
        ['--trace', dir],
        new RegExp(
          `^edgelimit simulate: ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: a directory, not a log file\n$`,
        ),
      ],
      [['--trace', file('empty.csv', 'time,key\n')], /no requests found/],
      // What the library refuses was thrown as a bug (exit 1, "edgelimit: Invalid edgelimit options").
      [
        ['--window', '367d'],
        /^edgelimit simulate: --window: expected at most 366d \(the longest window a rule takes\), got "367d"\n$/,
      ],
      [
        ['--trace', file('two.csv', '0,a\n1,a\n'), '--limit', '2147483647', '--window', '366d'],
        /^edgelimit simulate: sliding window counter: limit: limit × window is 67908586878892800000, above the exact-arithmetic bound \d+ \[ERR_RANGE\]\n$/,
      ],
      // A valid policy (check passes) whose rule refills its burst in 1,000 days: the exact sliding
      // log it is scored against would need a window of that length.
      [
        [
          '--config',
          file(
            'slow.yaml',
            'rules:\n  - { name: slow, algorithm: token-bucket, capacity: 1000, refillRate: 1, refillInterval: 1d }\n',
          ),
        ],
        /^edgelimit simulate: slow: cannot be scored: the exact sliding log of its burst and the time to refill it \(1000 per 24000 h\) is past what a rule takes: window: expected a duration like "60s" .* got 86400000000 \(number\) \[ERR_DURATION\]\n$/,
      ],
      [
        ['--config', file('bad.yaml', 'rules: [{ name: x, algorithm: magic }]\n')],
        /bad\.yaml:1:\d+\s+rules\[0\]\.algorithm/,
      ],
    ]
    for (const [args, message] of cases) {
      const io = captureIo(dir)
      expect(await runSimulate([...args, '--no-html'], io), args.join(' ')).toBe(2)
      expect(io.err()).toMatch(message)
    }
    const help = captureIo(dir)
    expect(await runSimulate(['--help'], help)).toBe(0)
    expect(help.out()).toContain('Usage: edgelimit simulate')
    const list = captureIo(dir)
    expect(await runSimulate(['--list'], list)).toBe(0)
    expect(list.out().split('\n').filter(Boolean)).toHaveLength(6)
  })
})
