import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'
import { gzipSync } from 'node:zlib'
import { createLimiter, type LimiterEvent, slidingWindow, tokenBucket } from 'edgelimit'
import { manualClock } from 'edgelimit/testing'
import { describe, expect, test } from 'vitest'
import { policyFromRules, type ReplayResult, replayLog, runReplay } from '../../src/replay/index.js'
import { htmlReport } from '../../src/replay/report.js'
import { duration, isoTime } from '../../src/report/format.js'
import { runSimulate } from '../../src/simulate/index.js'
import { startInProcess } from '../support/gateway.js'
import { clfTime } from './generate-log.js'
import { captureIo } from './io.js'

const SAMPLE = path.resolve(__dirname, '../../../../../shared/data/apache_access_sample.log')
const sample = readFileSync(SAMPLE)
const dir = mkdtempSync(path.join(tmpdir(), 'edgelimit-replay-'))
const file = (name: string, content: string | Buffer) => {
  const f = path.join(dir, name)
  writeFileSync(f, content)
  return f
}
const perIp = (limit: number, window = '1m') =>
  policyFromRules([{ name: 'per-ip', algorithm: 'sliding-window', limit, window }])
const line = (ip: string, ms: number, request = 'GET / HTTP/1.1', status = 200) =>
  `${ip} - - [${clfTime(ms)}] "${request}" ${status} 512 "-" "curl/8"\n`

describe('the real sample log (10,000 Combined Log Format lines, not in time order)', () => {
  test('every line parses; time order is restored within the reorder window', async () => {
    const r = await replayLog({ inputs: [SAMPLE], rules: perIp(60) })
    expect(r.lines).toBe(10_000)
    expect(r.requests).toBe(10_000)
    expect(r.malformed.count).toBe(0)
    expect(r.firstTs).toBe(Date.UTC(2015, 4, 17, 10, 5, 0))
    expect(r.lastTs).toBe(Date.UTC(2015, 4, 20, 21, 5, 59))
    // Apache stamps a request's start and writes the line at its end: lines run up to 59 s early.
    expect(r.outOfOrder).toEqual({ count: 9448, maxLagMs: 59_000, reorderMs: 120_000 })
    expect(r.late.count).toBe(0)
    const rule = r.rules[0]
    expect([rule?.matched, rule?.denied, rule?.deniedKeys]).toEqual([10_000, 87, 2])
    expect(rule?.topDenied.map(([k, n]) => [k, n])).toEqual([
      ['75.97.9.59', 72],
      ['130.237.218.86', 15],
    ])
    expect(rule?.topKeys[0]).toEqual(['66.249.73.135', 482, 0])
    expect(r.timeline.widthMs).toBe(600_000)
    expect(r.timeline.series[0]?.reduce((a, b) => a + b, 0)).toBe(10_000)
    expect(r.timeline.series[2]?.reduce((a, b) => a + b, 0)).toBe(87)
  })

  test('without reordering, lines are decided in file order at the latest time seen, and counted as late', async () => {
    const rules = policyFromRules([{ name: 'burst', algorithm: 'token-bucket', capacity: 20, refillRate: 2 }])
    const ordered = await replayLog({ inputs: [SAMPLE], rules })
    const clamped = await replayLog({ inputs: [SAMPLE], rules, reorderMs: 0 })
    expect(ordered.denied).toBe(0)
    expect(clamped.late).toEqual({ count: 9448, maxLagMs: 59_000 })
    // Clamping squeezes requests together: the burst rule then sees bursts that never happened.
    expect(clamped.denied).toBe(715)
  })

  test('gzip is detected by content and gives the same result', async () => {
    const gz = file('sample.log.gz', gzipSync(sample))
    const [a, b] = await Promise.all([
      replayLog({ inputs: [SAMPLE], rules: perIp(60) }),
      replayLog({ inputs: [gz], rules: perIp(60) }),
    ])
    expect(strip(b)).toEqual(strip(a))
  })

  test('a named pipe (`<(zcat access.log.gz)`, mkfifo) is read as a stream, plain or gzipped', async () => {
    // Its gzip magic was read at offset 0: ESPIPE, a crash (exit 1) instead of a replay.
    // A pipe written by another process, as a shell's process substitution is.
    const pipe = (name: string, from: string) => {
      const fifo = path.join(dir, name)
      execFileSync('mkfifo', [fifo])
      spawn('sh', ['-c', 'cat "$0" > "$1"', from, fifo], { stdio: 'ignore' })
      return fifo
    }
    const expected = strip(await replayLog({ inputs: [SAMPLE], rules: perIp(60) }))
    const gz = file('piped.log.gz', gzipSync(sample))
    for (const [name, from] of [
      ['fifo-plain', SAMPLE],
      ['fifo-gzip', gz],
    ] as const) {
      const r = await replayLog({ inputs: [pipe(name, from)], rules: perIp(60) })
      expect(strip(r)).toEqual(expected)
    }
    // The command, and simulate --trace.
    const io = captureIo(dir)
    expect(await runReplay([pipe('fifo-cli', SAMPLE), '--no-html', '--no-progress'], io)).toBe(0)
    expect(io.out()).toMatch(/^edgelimit replay: 10,000 lines from fifo-cli/)
    const sim = captureIo(dir)
    const trace = pipe('fifo-trace', file('piped.csv', '0,alice\n10,alice\n'))
    expect(await runSimulate(['--trace', trace, '--algorithms', 'fixed-window', '--no-html'], sim)).toBe(0)
    expect(sim.out()).toMatch(/^fifo-trace: 2 requests from 1 client/)
  })

  test('a policy file in the gateway format: match, keys, tiers by key value', async () => {
    const policy = file(
      'policy.yaml',
      `rules:
  - name: per-ip
    algorithm: sliding-window
    limit: 60
    window: 1m
  - name: feeds
    match: { path: "/**.xml" }
    key: [ip, route]
    algorithm: fixed-window
    limit: 2
    window: 1h
  - name: bots
    key: header:user-agent
    algorithm: gcra
    limit: 30
    period: 1m
    tiers:
      keys: { "UniversalFeedParser/4.2-pre-314-svn +http://feedparser.org/": strict }
      default: normal
      plans: { normal: { limit: 30 }, strict: { limit: 1, period: 1h } }
`,
    )
    const io = captureIo(dir)
    expect(await runReplay([SAMPLE, '--config', policy, '--json', 'r.json', '--no-html'], io)).toBe(0)
    const r = JSON.parse(readFileSync(path.join(dir, 'r.json'), 'utf8')) as ReplayResult
    const [ip, feeds, bots] = r.rules
    expect(ip?.denied).toBe(87)
    expect(feeds?.matched).toBe(37)
    expect(feeds?.key).toEqual(['ip', 'route'])
    expect(bots?.plans.map((p) => p.tier)).toEqual(['normal', 'strict'])
    expect(bots?.topDenied[0]?.[0]).toBe('UniversalFeedParser/4.2-pre-314-svn +http://feedparser.org/')
    expect(io.out()).toContain('Top keys blocked by "bots"')
  })
})

describe('malformed input is skipped, counted and reported with line numbers, fatal only when no line is a request', () => {
  const t = Date.UTC(2026, 0, 1)
  const content = [
    line('10.0.0.1', t),
    'garbage without structure\n',
    line('10.0.0.1', t + 1000).replace('[01/Jan/2026', '[41/Jan/2026'),
    '10.0.0.2 - - [01/Jan/2026:00:00:02 +0000] "GET / HTTP/1.1 200 1\n',
    '10.0.0.3 - - [01/Jan/2026:00:00:03 +0000] "GET / HTTP/1.1" abc 1\n',
    '{"time": "2026-01-01T00:00:04Z", "ip": "10.0.0.4"\n',
    '{"ip": "10.0.0.5"}\n',
    '\n',
    line('10.0.0.1', t + 5000).replace('\n', '\r\n'),
    `${'x'.repeat(1_200_000)}\n`,
    line('10.0.0.1', t + 6000).trimEnd(),
  ].join('')

  test('every bad line has its reason and number', async () => {
    const r = await replayLog({ inputs: [file('bad.log', content)], rules: perIp(100) })
    expect(r.requests).toBe(3)
    expect(r.malformed.count).toBe(7)
    expect(r.malformed.byReason).toEqual({
      'not a Common/Combined Log Format line': 1,
      'bad timestamp': 1,
      'unterminated request': 1,
      'bad status': 1,
      'invalid JSON': 1,
      'no time field (tried time, timestamp, @timestamp, ts, date, time_local, time_iso8601, msec, start_time)': 1,
      'line longer than 1 MiB': 1,
    })
    expect(r.malformed.examples.map((m) => m.line)).toEqual([2, 3, 4, 5, 6, 7, 10])
  })

  test('the CLI reports them and exits 0', async () => {
    const io = captureIo(dir)
    expect(await runReplay([file('bad2.log', content), '--no-html'], io)).toBe(0)
    expect(io.out()).toContain('Malformed lines (7, skipped):')
    expect(io.out()).toMatch(/bad2\.log:3: bad timestamp: 10\.0\.0\.1/)
  })

  test('a log of which no line is a request (a wrong --format) is exit 2 after its report, not a pass', async () => {
    // `replay --fail-on-block` in CI: a log that nothing could read blocked nothing, and passed.
    const io = captureIo(dir)
    expect(await runReplay([SAMPLE, '--format', 'json', '--no-html', '--fail-on-block'], io)).toBe(2)
    expect(io.out()).toContain('Malformed lines (10,000, skipped):')
    expect(io.err()).toMatch(
      /^edgelimit replay: none of the 10,000 lines is a request \(10,000 invalid JSON\): is --format \(json\) right\?$/m,
    )
    const garbage = captureIo(dir)
    expect(
      await runReplay([file('garbage.log', 'garbage\n{"ip": "10.0.0.5"}\n'), '--no-html'], garbage),
    ).toBe(2)
    expect(garbage.err()).toMatch(/^edgelimit replay: none of the 2 lines is a request \(1 not a Common/m)
    // A log without lines has nothing to read: not an error (a log rotated a moment ago).
    expect(await runReplay([file('empty.log', ''), '--no-html'], captureIo(dir))).toBe(0)
  })

  test('control characters in a quoted line are shown escaped, never sent to the terminal', async () => {
    const io = captureIo(dir)
    const forged = `\x1b[2J\x1b]0;pwned\x07 not a log line\n${line('10.0.0.1', t)}`
    expect(await runReplay([file('bad3.log', forged), '--no-html'], io)).toBe(0)
    expect(io.out()).toContain(
      'bad3.log:1: not a Common/Combined Log Format line: \\x1b[2J\\x1b]0;pwned\\x07 not a log line',
    )
    expect(io.out()).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/)
  })
  test('control characters in a key (a forged user agent) are shown escaped in the tables', async () => {
    const ua = '\x1b]0;PWNED\x07\x1b[31mRED\x1b[0m\x1b[2K\x9b'
    const log = Array.from({ length: 4 }, (_, i) =>
      line('10.0.0.1', t + i * 1000).replace('curl/8', ua),
    ).join('')
    const io = captureIo(dir)
    const rules = file(
      'ua.yaml',
      'version: 1\nrules:\n  - { name: bots, key: header:user-agent, algorithm: fixed-window, limit: 1, window: 1m }\n',
    )
    expect(await runReplay([file('esc.log', log), '--config', rules, '--no-html'], io)).toBe(0)
    expect(io.out()).toContain('Top keys blocked by "bots"')
    expect(io.out()).toContain('\\x1b]0;PWNED\\x07\\x1b[31mRED\\x1b[0m\\x1b[2K\\x9b')
    expect(io.out()).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/)
  })

  test('an epoch time of more than 20 digits (no unit: past nanoseconds) is a malformed line, not a crash; every line is counted once', async () => {
    const json = (time: unknown) => `${JSON.stringify({ time, ip: '10.0.0.1', method: 'GET', path: '/' })}\n`
    const content = [
      json(1_700_000_001),
      json(1e21),
      json(1e300),
      json(-1e300),
      json('900000000000000000000'),
      json(1_700_000_002),
    ]
    const r = await replayLog({ inputs: [file('far.log', content.join(''))], rules: perIp(100) })
    expect(r.lines).toBe(6)
    expect(r.requests).toBe(2)
    expect(r.malformed.count).toBe(4)
    expect(r.malformed.examples.map((m) => [m.line, m.reason.split(' ').slice(0, 2).join(' ')])).toEqual([
      [2, 'bad time'],
      [3, 'bad time'],
      [4, 'bad time'],
      [5, 'bad time'],
    ])
    const io = captureIo(dir)
    expect(await runReplay([file('far2.log', content.join('')), '--no-html'], io)).toBe(0)
    expect(io.err()).not.toContain('Invalid time value')
    expect(io.out()).toContain('Malformed lines (4, skipped):')
    expect(io.out()).toContain('far2.log:2: bad time 1e+21')
    expect(io.out()).toContain('far2.log:5: bad time "900000000000000000000"')
  })

  test('a bad epoch time is quoted as written: 1e400 (past a double: JSON.parse reads Infinity) is not "null"', async () => {
    const content =
      '{"time": 1e400, "ip": "10.0.0.1", "path": "/"}\n{"time": -1E999, "ip": "10.0.0.1", "path": "/"}\n'
    const r = await replayLog({ inputs: [file('inf.log', content)], rules: perIp(100) })
    expect(r.malformed.examples.map((m) => m.reason)).toEqual(['bad time 1e400', 'bad time -1E999'])
  })

  test('an access-log time with a letter in its year or an offset beyond 23:59 is a bad timestamp, not another year', async () => {
    const at = (time: string) => `10.0.0.1 - - [${time}] "GET / HTTP/1.1" 200 512\n`
    const content = [
      at('17/May/2015:10:05:03 +0000'),
      at('17/May/201x:10:05:04 +0000'),
      at('17/May/20x5:10:05:04 +0000'),
      at('17/May/2015:10:05:04 +0099'),
      at('17/May/2015:10:05:04 +9900'),
      at('17/May/2015:10:05:04 -2400'),
      // The same instant in the zones furthest apart, then a second later.
      at('18/May/2015:00:05:03 +1400'),
      at('16/May/2015:22:05:03 -1200'),
      at('17/May/2015:15:35:04 +0530'),
    ]
    const r = await replayLog({ inputs: [file('zones.log', content.join(''))], rules: perIp(100) })
    expect(r.requests).toBe(4)
    expect(r.malformed.byReason).toEqual({ 'bad timestamp': 5 })
    expect(r.malformed.examples.map((m) => m.line)).toEqual([2, 3, 4, 5, 6])
    expect([r.firstTs, r.lastTs]).toEqual([Date.UTC(2015, 4, 17, 10, 5, 3), Date.UTC(2015, 4, 17, 10, 5, 4)])
    expect(r.outOfOrder.count).toBe(0)
  })

  test('a connection logged without a request ("-" from Apache, "" from nginx) is not decided: no rule sees it', async () => {
    const t = Date.UTC(2026, 0, 1)
    // A browser that preconnects and sends nothing: Apache logs `"-" 408`, nginx `"" 400`.
    const content = [
      line('10.0.0.1', t),
      line('10.0.0.1', t + 1, '-', 408),
      line('10.0.0.1', t + 2, '', 400),
      line('10.0.0.1', t + 3, '-', 408),
      line('10.0.0.1', t + 4),
      line('10.0.0.1', t + 5, '- /', 400),
    ].join('')
    const r = await replayLog({ inputs: [file('preconnect.log', content)], rules: perIp(2) })
    expect([r.lines, r.requests, r.rules[0]?.matched, r.rules[0]?.denied]).toEqual([6, 3, 3, 1])
    expect(r.malformed.byReason).toEqual({ 'no request ("-" or "": the connection sent none)': 3 })
    expect(r.malformed.examples.map((m) => m.line)).toEqual([2, 3, 4])
    // nginx's JSON lines say so with an empty request; a line without any request field is kept.
    const json = (fields: object) =>
      `${JSON.stringify({ time: t / 1000, remote_addr: '10.0.0.1', ...fields })}\n`
    const lines = [
      json({ request: 'GET / HTTP/1.1', status: 200 }),
      json({ request: '', request_uri: '', status: 400 }),
      json({ path: '-', status: 408 }),
      json({ status: 200 }),
    ]
    const j = await replayLog({ inputs: [file('preconnect.jsonl', lines.join(''))], rules: perIp(2) })
    expect([j.requests, j.malformed.count, j.rules[0]?.matched]).toEqual([2, 2, 2])
    expect(j.malformed.examples.map((m) => [m.line, m.reason])).toEqual([
      [2, 'no request ("-" or "": the connection sent none)'],
      [3, 'no request ("-" or "": the connection sent none)'],
    ])
  })

  test('a byte order mark opening a log (Windows editors, PowerShell) is not part of its first line', async () => {
    const t = Date.UTC(2026, 0, 1)
    const bom = '\uFEFF'
    // The first line's client was "\uFEFF10.0.0.1", another key: three requests of one client under
    // a limit of 2 blocked none.
    const clf = [line('10.0.0.1', t), line('10.0.0.1', t + 1), line('10.0.0.1', t + 2)].join('')
    const r = await replayLog({ inputs: [file('bom.log', bom + clf)], rules: perIp(2) })
    expect([r.requests, r.malformed.count, r.rules[0]?.denied, r.rules[0]?.topKeys]).toEqual([
      3,
      0,
      1,
      [['10.0.0.1', 3, 0]],
    ])
    // A JSON line after the mark was "not a Common/Combined Log Format line", in auto and json formats.
    const json = `${bom}{"time": "2026-01-01T00:00:00Z", "ip": "10.0.0.1"}\n`
    for (const format of ['auto', 'json'] as const) {
      const j = await replayLog({ inputs: [file('bom.jsonl', json)], rules: perIp(2), format })
      expect([format, j.requests, j.malformed.count]).toEqual([format, 1, 0])
    }
    // Gzipped, as from standard input, and only at the start of a file: a mark inside is kept.
    const g = await replayLog({
      inputs: [file('bom.log.gz', gzipSync(bom + clf + bom + clf))],
      rules: perIp(2),
    })
    expect([g.requests, g.malformed.count]).toEqual([6, 0])
    expect(g.rules[0]?.topKeys).toEqual([
      ['10.0.0.1', 5, 0],
      [`${bom}10.0.0.1`, 1, 0],
    ])
  })

  test('a request line in absolute form (http://host/path, as sent to a proxy) is matched on its path and host, as the gateway reads it', async () => {
    const t = Date.UTC(2026, 0, 1)
    // The login rule matched none of these (its path was "/example.com/login"), and a host rule none.
    const targets = [
      'http://example.com/login',
      'https://Example.COM:8443/login?next=/',
      'HTTP://example.com/login',
      'http://example.com',
      'http://example.com?next=/login',
      '/login',
    ]
    const content = targets.map((target, i) => line('10.0.0.1', t + i, `POST ${target} HTTP/1.1`)).join('')
    const rules = policyFromRules([
      { name: 'login', algorithm: 'fixed-window', limit: 100, window: '1m', match: { path: '/login' } },
      { name: 'site', algorithm: 'fixed-window', limit: 100, window: '1m', match: { host: 'example.com' } },
      { name: 'by-path', algorithm: 'fixed-window', limit: 100, window: '1m', key: 'path' },
    ])
    const r = await replayLog({ inputs: [file('absolute.log', content)], rules })
    expect(r.rules.map((rule) => [rule.name, rule.matched])).toEqual([
      ['login', 4],
      ['site', 5],
      ['by-path', 6],
    ])
    expect(r.rules[2]?.topKeys.map(([k, n]) => [k, n])).toEqual([
      ['/login', 4],
      ['/', 2],
    ])
    // JSON lines too: the scheme in any case, the host from the authority when no field names it.
    const json = targets.map(
      (target, i) => `${JSON.stringify({ time: t + i, ip: '10.0.0.1', path: target })}\n`,
    )
    const j = await replayLog({ inputs: [file('absolute.jsonl', json.join(''))], rules })
    expect(j.rules.map((rule) => [rule.name, rule.matched])).toEqual([
      ['login', 4],
      ['site', 5],
      ['by-path', 6],
    ])
  })

  test('a request the gateway answers before its rules (CONNECT, "*", no path, a bad "%" escape) is not decided: no rule sees it', async () => {
    const t = Date.UTC(2026, 0, 1)
    // A scanner's probes: serve answers them 405 or 400 and charges no one. Replay charged them,
    // and the client's next real request was blocked.
    const content = [
      line('10.0.0.1', t, 'CONNECT www.example.com:443 HTTP/1.1', 405),
      line('10.0.0.1', t + 1, 'OPTIONS * HTTP/1.1', 400),
      line('10.0.0.1', t + 2, 'GET /%zz HTTP/1.1', 400),
      line('10.0.0.1', t + 3, 'GET index.html HTTP/1.1', 400),
      line('10.0.0.1', t + 4, 'GET /login?width=100% HTTP/1.1'),
      line('10.0.0.1', t + 5, 'GET /a%2Fb HTTP/1.1'),
      line('10.0.0.1', t + 6),
    ].join('')
    const r = await replayLog({ inputs: [file('refused.log', content)], rules: perIp(2) })
    expect([r.lines, r.requests, r.rules[0]?.matched, r.rules[0]?.denied]).toEqual([7, 3, 3, 1])
    expect(r.malformed.examples.map((m) => [m.line, m.reason])).toEqual([
      [1, 'CONNECT (the gateway answers 405 before its rules)'],
      [2, 'bad target (the gateway answers 400 before its rules: no path, or a "%" without two hex digits)'],
      [3, 'bad target (the gateway answers 400 before its rules: no path, or a "%" without two hex digits)'],
      [4, 'bad target (the gateway answers 400 before its rules: no path, or a "%" without two hex digits)'],
    ])
    // JSON lines alike; a line without a path field is kept.
    const json = (fields: object) =>
      `${JSON.stringify({ time: t / 1000, remote_addr: '10.0.0.1', ...fields })}\n`
    const j = await replayLog({
      inputs: [
        file(
          'refused.jsonl',
          [json({ request: 'CONNECT a:443 HTTP/1.1' }), json({ path: '/x%4' }), json({ status: 200 })].join(
            '',
          ),
        ),
      ],
      rules: perIp(2),
    })
    expect([j.requests, j.malformed.count]).toEqual([1, 2])
  })

  test('isoTime never throws: a time outside the Date range is shown as a dash', () => {
    expect(isoTime(Date.UTC(2015, 4, 17, 10, 5, 3))).toBe('2015-05-17T10:05:03Z')
    expect(isoTime(9e15)).toBe('—')
    expect(isoTime(Number.NaN)).toBe('—')
    expect(isoTime(Number.POSITIVE_INFINITY)).toBe('—')
  })

  test('duration rounds into the next unit: never "60 s", "59 m 60 s" or "1 h 60 m"', () => {
    expect(duration(59_960)).toBe('1 m')
    expect(duration(3_599_999)).toBe('1 h')
    expect(duration(7_199_999)).toBe('2 h')
    expect(duration(3_570_000)).toBe('59 m 30 s')
    expect(duration(5_400_000)).toBe('1 h 30 m')
    expect(duration(12_500)).toBe('12.5 s')
    expect(duration(850)).toBe('850 ms')
  })
})

describe('JSON lines', () => {
  test('common field names, ISO and epoch times, field mapping', async () => {
    const t = Date.UTC(2026, 0, 1)
    const lines = [
      {
        time: new Date(t).toISOString(),
        remote_addr: '10.0.0.1',
        request: 'POST /login?next=/ HTTP/1.1',
        status: 401,
      },
      { ts: t / 1000 + 1, ip: '10.0.0.1', method: 'POST', uri: '/login', status: 401 },
      { timestamp: t + 2000, client_ip: '10.0.0.1', method: 'post', path: '/login', status: 200 },
      { time: new Date(t + 3000).toISOString(), remote_addr: '10.0.0.1', request: 'GET / HTTP/1.1' },
    ]
    const f = file('log.jsonl', lines.map((l) => JSON.stringify(l)).join('\n'))
    const rules = policyFromRules([
      {
        name: 'login',
        match: { path: '/login', methods: ['POST'] },
        algorithm: 'fixed-window',
        limit: 2,
        window: '1m',
      },
    ])
    const r = await replayLog({ inputs: [f], rules })
    expect([r.requests, r.rules[0]?.matched, r.rules[0]?.denied]).toEqual([4, 3, 1])
    const mapped = file('custom.jsonl', `${JSON.stringify({ when: t, who: { addr: '10.9.9.9' } })}\n`)
    const io = captureIo(dir)
    expect(
      await runReplay(
        [mapped, '--field', 'time=when', '--field', 'ip=who.addr', '--no-html', '--json', 'm.json'],
        io,
      ),
    ).toBe(0)
    const m = JSON.parse(readFileSync(path.join(dir, 'm.json'), 'utf8')) as ReplayResult
    expect(m.rules[0]?.topKeys[0]?.[0]).toBe('10.9.9.9')
  })

  test('an epoch time is seconds, milliseconds, microseconds or nanoseconds by its count of digits (10, 13, 16, 19), read exactly', async () => {
    const json = (time: string) => `{"ts":${time},"ip":"10.0.0.1","method":"GET","path":"/"}\n`
    // The same instant four ways, each as a number and as a string; then 999,999,999 ns past the
    // second, which JSON.parse's double makes the next second (1700000001000000000).
    const times = [
      '1700000000',
      '1700000000123',
      '1700000000123456',
      '1700000000123456789',
      '1700000000999999999',
    ]
    const content = times.flatMap((t) => [json(t), json(`"${t}"`)]).join('')
    const jsonOut = path.join(dir, 'units.json')
    expect(
      await runReplay(
        [file('units.log', content), '--no-html', '--no-progress', '--reorder', '0', '--json', jsonOut],
        captureIo(dir),
      ),
    ).toBe(0)
    const r = JSON.parse(readFileSync(jsonOut, 'utf8')) as ReplayResult
    expect([r.requests, r.malformed.count, r.outOfOrder.count, r.late.count]).toEqual([10, 0, 0, 0])
    expect([r.firstTs, r.lastTs]).toEqual([1_700_000_000_000, 1_700_000_000_999])
    // All ten in one second: a limit of 8 per second denies two.
    const perSecond = policyFromRules([{ name: 's', algorithm: 'fixed-window', limit: 8, window: '1s' }])
    expect((await replayLog({ inputs: [file('units2.log', content)], rules: perSecond })).denied).toBe(2)
  })

  test('times as Ruby, Go and mail write them, with their offset or zone, are read, as before the strict parser', async () => {
    const json = (time: unknown) => `${JSON.stringify({ time, ip: '10.0.0.1', path: '/' })}\n`
    const content = [
      json('2015-05-17 10:05:03 +0000'),
      json('2015-05-17 15:35:03 +05:30'),
      json('2015-05-17 10:05:03 UTC'),
      json('2015-05-17 10:05:03 GMT'),
      json('2015-05-17 10:05:03.123456789 +0000 UTC'),
      json('Sun, 17 May 2015 12:05:03 +0200'),
      json('17 May 2015 10:05:03 UTC'),
      // A local time without a zone (Go's log package) is refused, not read in the machine's zone.
      json('2015/05/17 10:05:03'),
    ].join('')
    const r = await replayLog({ inputs: [file('ruby.jsonl', content)], rules: perIp(100) })
    expect([r.requests, r.malformed.count]).toEqual([7, 1])
    expect([r.firstTs, r.lastTs]).toEqual([
      Date.UTC(2015, 4, 17, 10, 5, 3),
      Date.UTC(2015, 4, 17, 10, 5, 3, 123),
    ])
  })

  test("a time without an offset is UTC whatever the machine's zone; free text is a bad time, not a guess", async () => {
    const json = (time: unknown) => `${JSON.stringify({ time, ip: '10.0.0.1', path: '/' })}\n`
    const t = Date.UTC(2015, 4, 17, 10, 5, 3)
    const content = [
      json('2015-05-17T10:05:03'),
      json('2015-05-17 10:05:03.250'),
      json('2015-05-17T15:35:03+05:30'),
      json('2015-05-17T02:05:03.5-0800'),
      json('Sun, 17 May 2015 10:05:03 GMT'),
      json('17/May/2015:10:05:03 +0000'),
      json('hello 7'),
      json('Sun 3'),
      json('2015-02-31T10:05:03Z'),
      json('2015-05-17T10:05:03+25:00'),
      json('17/May/2015:10:05:03 +9900'),
    ].join('')
    const zone = process.env.TZ
    process.env.TZ = 'Asia/Kolkata'
    try {
      const r = await replayLog({ inputs: [file('zones.jsonl', content)], rules: perIp(100) })
      expect(r.requests).toBe(6)
      expect([r.firstTs, r.lastTs]).toEqual([t, t + 500])
      expect(r.malformed.examples.map((m) => [m.line, m.reason])).toEqual([
        [7, 'bad time "hello 7"'],
        [8, 'bad time "Sun 3"'],
        [9, 'bad time "2015-02-31T10:05:03Z"'],
        [10, 'bad time "2015-05-17T10:05:03+25:00"'],
        [11, 'bad time "17/May/2015:10:05:03 +9900"'],
      ])
    } finally {
      if (zone === undefined) delete process.env.TZ
      else process.env.TZ = zone
    }
  })

  test("behind trusted proxies a JSON line's X-Forwarded-For names the client, as serve reads the request", async () => {
    // nginx behind a load balancer logs the balancer as remote_addr and the client in
    // $http_x_forwarded_for: every request was keyed by the balancer, and its clients blocked
    // together, where serve with the same identity counts each client alone.
    const t = Date.UTC(2026, 0, 1)
    const policy = [
      'identity:',
      '  trustedProxies: ["127.0.0.0/8"]',
      'rules:',
      '  - name: per-ip',
      '    algorithm: fixed-window',
      '    limit: 2',
      '    window: 1m',
      '    key: ip',
    ].join('\n')
    // What each request carries: its forwarding header (none: the balancer's own health check).
    const sent: (string | undefined)[] = [
      '203.0.113.1',
      '203.0.113.1',
      '203.0.113.1',
      '198.51.100.7, 203.0.113.2',
      '203.0.113.3',
      undefined,
      '203.0.113.4',
      undefined,
      undefined,
    ]
    const lines = sent.map((xff, i) => ({
      time: new Date(t + i).toISOString(),
      remote_addr: '127.0.0.1',
      request: 'GET / HTTP/1.1',
      status: 200,
      // nginx writes an absent header as "-".
      http_x_forwarded_for: xff ?? '-',
    }))
    // A peer that is no trusted proxy names itself, whatever it sends.
    lines.push({
      ...(lines[0] as (typeof lines)[0]),
      remote_addr: '192.0.2.9',
      time: new Date(t + 9).toISOString(),
    })
    const log = file('forwarded.jsonl', lines.map((l) => `${JSON.stringify(l)}\n`).join(''))
    const io = captureIo(dir)
    const json = path.join(dir, 'forwarded.json')
    const args = [log, '-c', file('forwarded.yaml', policy), '--no-html', '--no-progress', '--json', json]
    expect(await runReplay(args, io)).toBe(0)
    const rule = (JSON.parse(readFileSync(json, 'utf8')) as ReplayResult).rules[0]
    expect(rule?.topDenied.map(([k, n, , requests]) => [k, n, requests])).toEqual([
      ['127.0.0.1', 1, 3],
      ['203.0.113.1', 1, 3],
    ])
    expect(rule?.topKeys.map(([k, n]) => [k, n])).toEqual([
      ['127.0.0.1', 3],
      ['203.0.113.1', 3],
      ['192.0.2.9', 1],
      ['203.0.113.2', 1],
      ['203.0.113.3', 1],
      ['203.0.113.4', 1],
    ])
    // What serve answers the same requests from a trusted proxy (a 429 where replay denies).
    const gw = await startInProcess(policy, { upstream: 'http://127.0.0.1:9', clock: manualClock(t) })
    try {
      const statuses = []
      for (const xff of sent)
        statuses.push(
          (await fetch(gw.url, { headers: xff === undefined ? {} : { 'x-forwarded-for': xff } })).status,
        )
      expect(statuses).toEqual([502, 502, 429, 502, 502, 502, 502, 502, 429])
    } finally {
      await gw.close()
    }
  })

  test('a JSON line indented with spaces or tabs is JSON in auto format, as JSON.parse reads it', async () => {
    // It was "not a Common/Combined Log Format line": auto looked for "{" at the first byte only.
    const t = Date.UTC(2026, 0, 1)
    const json = JSON.stringify({ time: t, ip: '10.0.0.1', path: '/' })
    const content = [`  ${json}`, `\t${json}`, ` \t ${json}`, `  ${line('10.0.0.2', t).trimEnd()}`].join('\n')
    const r = await replayLog({ inputs: [file('indented.jsonl', content)], rules: perIp(100) })
    expect([r.requests, r.malformed.count]).toEqual([4, 0])
    expect(r.rules[0]?.topKeys.map(([k, n]) => [k, n])).toEqual([
      ['10.0.0.1', 3],
      ['10.0.0.2', 1],
    ])
  })

  test('header and query keys read JSON fields; a missing one falls back to the client', async () => {
    const t = Date.UTC(2026, 0, 1)
    const lines = [
      { time: t, ip: '10.0.0.1', path: '/api', http_x_api_key: 'k1' },
      { time: t, ip: '10.0.0.1', path: '/api', headers: { 'x-api-key': 'k1' } },
      { time: t, ip: '10.0.0.1', path: '/api' },
      { time: t, ip: '10.0.0.2', uri: '/api?key=k2' },
    ]
    const f = file('keys.jsonl', lines.map((l) => JSON.stringify(l)).join('\n'))
    const rules = policyFromRules([
      { name: 'by-header', key: 'header:x-api-key', algorithm: 'fixed-window', limit: 100, window: '1m' },
      { name: 'by-query', key: 'query:key', algorithm: 'fixed-window', limit: 100, window: '1m' },
    ])
    const r = await replayLog({ inputs: [f], rules })
    expect(r.rules[0]?.topKeys.map(([k, n]) => [k, n])).toEqual([
      ['k1', 2],
      ['fallback|ip=10.0.0.1', 1],
      ['fallback|ip=10.0.0.2', 1],
    ])
    expect(r.rules[1]?.topKeys.map(([k]) => k)).toContain('k2')
  })

  test('headers logged as Caddy logs them (request.headers, canonical names, lists of values) are read', async () => {
    // Caddy: "request": {"headers": {"X-Api-Key": ["k1"]}}. Looked up in lower case only, every
    // such line fell back to the client.
    const t = Date.UTC(2026, 0, 1)
    const caddy = (headers: Record<string, string[]>) => ({
      ts: t / 1000,
      request: { remote_ip: '10.0.0.1', method: 'GET', uri: '/api', headers },
    })
    const lines = [
      caddy({ 'X-Api-Key': ['k1'] }),
      caddy({ 'X-API-KEY': ['k1'] }),
      { time: t, ip: '10.0.0.1', path: '/api', headers: { 'X-Api-Key': 'k1' } },
      caddy({ 'X-Api-Key': ['k2', 'k3'] }),
      caddy({ 'X-Api-Key': [] }),
      caddy({}),
    ]
    const f = file('caddy.jsonl', lines.map((l) => JSON.stringify(l)).join('\n'))
    const rules = policyFromRules([
      { name: 'by-header', key: 'header:x-api-key', algorithm: 'fixed-window', limit: 100, window: '1m' },
    ])
    const r = await replayLog({ inputs: [f], rules })
    expect(r.rules[0]?.topKeys.map(([k, n]) => [k, n])).toEqual([
      ['k1', 3],
      ['fallback|ip=10.0.0.1', 2],
      ['k2, k3', 1],
    ])
  })

  test('a header named like an Object.prototype member is missing unless the line has it', async () => {
    const t = Date.UTC(2026, 0, 1)
    const lines: Record<string, unknown>[] = [
      { time: t, ip: '10.0.0.1', path: '/' },
      { time: t, ip: '10.0.0.1', path: '/', headers: { 'x-other': '1' } },
      { time: t, ip: '10.0.0.1', path: '/', headers: { constructor: 'c1' } },
    ]
    const f = file('proto-keys.jsonl', lines.map((l) => JSON.stringify(l)).join('\n'))
    const rules = policyFromRules([
      { name: 'by-ctor', key: 'header:constructor', algorithm: 'fixed-window', limit: 100, window: '1m' },
    ])
    const r = await replayLog({ inputs: [f], rules })
    expect(r.rules[0]?.topKeys.map(([k, n]) => [k, n])).toEqual([
      ['fallback|ip=10.0.0.1', 2],
      ['c1', 1],
    ])
  })
})

describe('shadow counts equal the limiter in shadow mode (what the gateway counts)', () => {
  test('same traffic, same decisions: replay vs createLimiter({ mode: "shadow" }) on a manual clock', async () => {
    const t0 = Date.UTC(2026, 0, 1)
    const requests: [string, number][] = []
    let seed = 3
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed / 0x7fffffff
    }
    for (let i = 0; i < 5000; i++) {
      // Whole seconds: the Common Log Format has no milliseconds.
      requests.push([
        `10.0.0.${Math.floor(rand() * 20)}`,
        t0 + Math.floor((i * 500 + rand() * 3000) / 1000) * 1000,
      ])
    }
    requests.sort((a, b) => a[1] - b[1])
    const log = requests.map(([ip, ms]) => line(ip, ms)).join('')
    const rules = policyFromRules([
      { name: 'burst', algorithm: 'token-bucket', capacity: 5, refillRate: 1, refillInterval: '10s' },
      { name: 'minute', algorithm: 'sliding-window', limit: 6, window: '1m' },
    ])
    const r = await replayLog({ inputs: [Readable.from([log])], rules })

    const clock = manualClock(0)
    const counts = new Map<string, number>()
    const limiter = createLimiter({
      rules: [
        {
          name: 'burst',
          algorithm: tokenBucket({ capacity: 5, refillRate: 1, refillInterval: '10s' }),
          mode: 'shadow',
        },
        {
          name: 'minute',
          algorithm: slidingWindow({ limit: 6, window: '1m' }),
          mode: 'shadow',
        },
      ],
      clock,
      onEvent: (e: LimiterEvent) => {
        if (e.type === 'shadow-deny') counts.set(e.rule, (counts.get(e.rule) ?? 0) + 1)
      },
    })
    let allowed = 0
    for (const [ip, ms] of requests) {
      clock.set(ms)
      if (limiter.limitSync(ip).allowed) allowed++
    }
    expect(allowed).toBe(requests.length)
    expect(r.rules.map((x) => x.denied)).toEqual([counts.get('burst') ?? 0, counts.get('minute') ?? 0])
    expect(counts.get('burst')).toBeGreaterThan(100)
    expect(counts.get('minute')).toBeGreaterThan(100)
    // Written out of order (up to a minute, as Apache does), the log still counts the same.
    const shuffled = requests
      .map((req, i) => ({ req, at: i + rand() * 120 }))
      .sort((a, b) => a.at - b.at)
      .map(({ req: [ip, ms] }) => line(ip, ms))
      .join('')
    const s = await replayLog({ inputs: [Readable.from([shuffled])], rules })
    expect(s.outOfOrder.count).toBeGreaterThan(1000)
    expect(s.rules.map((x) => x.denied)).toEqual(r.rules.map((x) => x.denied))
  })

  test('enforce mode walks the rules as the gateway does: the first enforced denial stops the walk', async () => {
    const t = Date.UTC(2026, 0, 1)
    const log = Array.from({ length: 10 }, (_, i) => line('10.0.0.1', t + i * 100)).join('')
    const rules = policyFromRules([
      { name: 'watch', algorithm: 'fixed-window', limit: 2, window: '1m', mode: 'shadow' },
      { name: 'tight', algorithm: 'fixed-window', limit: 3, window: '1m' },
      { name: 'after', algorithm: 'fixed-window', limit: 5, window: '1m' },
    ])
    const shadow = await replayLog({ inputs: [Readable.from([log])], rules })
    const enforce = await replayLog({ inputs: [Readable.from([log])], rules, mode: 'enforce' })
    expect(shadow.rules.map((x) => [x.matched, x.denied])).toEqual([
      [10, 8],
      [10, 7],
      [10, 5],
    ])
    expect([shadow.blocked, shadow.denied]).toEqual([0, 8])
    // `watch` stays in shadow and sees everything; `tight` blocks 7, which `after` never sees.
    expect(enforce.rules.map((x) => [x.matched, x.denied])).toEqual([
      [10, 8],
      [10, 7],
      [3, 0],
    ])
    expect(enforce.blocked).toBe(7)
    // The overview's "any rule" series is what the headline counts: blocked (7) in enforce mode,
    // not every request some rule denied (8, `watch`'s shadow denials included).
    const sum = (r: ReplayResult) => r.timeline.series[1]?.reduce((a, b) => a + b, 0)
    expect([sum(enforce), enforce.denied]).toEqual([7, 8])
    expect(sum(shadow)).toBe(shadow.denied)
    expect(htmlReport(enforce, 'log')).toContain('blocked (any rule)')
    expect(htmlReport(shadow, 'log')).toContain('would block (any rule)')
  })

  test("enforce mode blocks only for the keys in a rule's `enforce` share; other denials do not stop the walk", async () => {
    const t = Date.UTC(2026, 0, 1)
    const log = Array.from({ length: 10 }, (_, i) => line('10.0.0.1', t + i * 100)).join('')
    const rules = (enforce: number) =>
      policyFromRules([
        { name: 'tight', algorithm: 'fixed-window', limit: 3, window: '1m', enforce },
        { name: 'after', algorithm: 'fixed-window', limit: 5, window: '1m' },
      ])
    const none = await replayLog({ inputs: [Readable.from([log])], rules: rules(0), mode: 'enforce' })
    // `tight` denies 7 but blocks none: `after` sees all 10 and blocks 5.
    expect(none.rules.map((x) => [x.matched, x.denied])).toEqual([
      [10, 7],
      [10, 5],
    ])
    expect(none.blocked).toBe(5)
    const all = await replayLog({ inputs: [Readable.from([log])], rules: rules(100), mode: 'enforce' })
    expect(all.rules.map((x) => [x.matched, x.denied])).toEqual([
      [10, 7],
      [3, 0],
    ])
    expect(all.blocked).toBe(7)
  })
})

describe('the command', () => {
  test('one line, one request, one blocked: the headline writes them in the singular', async () => {
    // "1 lines from …", "1 requests evaluated", "1 requests (50.0 %) would have been blocked".
    const log = file('one.log', line('10.0.0.1', Date.UTC(2026, 0, 1)))
    const io = captureIo(dir)
    expect(await runReplay([log, '--limit', '1', '--no-html'], io)).toBe(0)
    expect(io.out()).toMatch(/^edgelimit replay: 1 line from .*one\.log /m)
    // In time order: nothing to say of lags or reordering.
    expect(io.out()).toMatch(/^1 request evaluated, 0 malformed lines skipped; none out of order$/m)
    expect(io.out()).toMatch(/^0 requests \(0 %\) would have been blocked by at least one rule$/m)
    expect(io.err()).toMatch(/^replayed 1 line in [\d.]+ s \(/m)
    const two = file(
      'two.log',
      line('10.0.0.1', Date.UTC(2026, 0, 1)) + line('10.0.0.1', Date.UTC(2026, 0, 1) + 1),
    )
    const twoIo = captureIo(dir)
    expect(await runReplay([two, '--limit', '1', '--no-html'], twoIo)).toBe(0)
    expect(twoIo.out()).toMatch(/^1 request \(50\.0 %\) would have been blocked by at least one rule$/m)
  })

  test('table, HTML report, progress on a terminal, --fail-on-block', async () => {
    const io = captureIo(dir, true)
    expect(
      await runReplay([SAMPLE, '--limit', '60', '--html', 'out/replay.html', '--fail-on-block'], io),
    ).toBe(1)
    expect(io.out()).toContain('87 requests (0.870 %) would have been blocked by at least one rule')
    expect(io.out()).toMatch(/sliding-window\s+sliding-window\s+limit=60 window=60s\s+ip\s+10,000\s+87/)
    expect(io.err()).toMatch(/lines\/s/)
    const html = readFileSync(path.join(dir, 'out/replay.html'), 'utf8')
    expect(html).toContain('var uPlot=')
    expect(html).not.toMatch(/(src|href)="https?:/)
  })

  test('--fail-on-block in enforce mode counts what was blocked, not what shadow rules denied', async () => {
    const t = Date.UTC(2026, 0, 1)
    const log = file('ten.log', Array.from({ length: 10 }, (_, i) => line('10.0.0.1', t + i * 100)).join(''))
    const policy = (mode: string) =>
      file(
        `fail-${mode}.yaml`,
        `rules:\n  - { name: a, algorithm: fixed-window, limit: 1, window: 1m, mode: ${mode} }\n`,
      )
    const run = (mode: string, rule: string) =>
      runReplay(
        [log, '-c', policy(rule), '--mode', mode, '--no-html', '--no-progress', '--fail-on-block'],
        captureIo(dir),
      )
    // Only a shadow rule: 9 denied, nothing blocked.
    expect(await run('enforce', 'shadow')).toBe(0)
    expect(await run('enforce', 'enforce')).toBe(1)
    // In shadow mode every denial is what would be blocked.
    expect(await run('shadow', 'shadow')).toBe(1)
  })

  test("the keys held per rule are the policy's memory store bound, as serve holds them; --max-keys overrides it", async () => {
    const t = Date.UTC(2026, 0, 1)
    // Three clients, then the first again: with 2 keys held, its state was evicted (LRU).
    const ips = ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.1']
    const log = file('lru.log', ips.map((ip, i) => line(ip, t + i * 1000)).join(''))
    const rules = '  - { name: once, algorithm: fixed-window, limit: 1, window: 1h }\n'
    const bounded = file(
      'lru.yaml',
      `store: { type: memory, maxKeys: 2 }\nidentity: { trustedProxies: [127.0.0.1] }\nrules:\n${rules}`,
    )
    const denied = async (args: string[]) => {
      const json = path.join(dir, 'lru.json')
      expect(
        await runReplay([log, ...args, '--no-html', '--no-progress', '--json', json], captureIo(dir)),
      ).toBe(0)
      return (JSON.parse(readFileSync(json, 'utf8')) as ReplayResult).denied
    }
    expect(await denied(['-c', bounded])).toBe(0)
    expect(await denied(['-c', bounded, '--max-keys', '3'])).toBe(1)
    // What serve does with the same policy and traffic.
    const gw = await startInProcess(readFileSync(bounded, 'utf8'), {
      upstream: 'http://127.0.0.1:9',
      clock: manualClock(t),
    })
    try {
      const statuses = []
      for (const ip of ips)
        statuses.push((await fetch(gw.url, { headers: { 'x-forwarded-for': ip } })).status)
      // 502: admitted, and the upstream (a closed port) is not there; a denial is a 429.
      expect(statuses).toEqual([502, 502, 502, 502])
    } finally {
      await gw.close()
    }
    // The store's default bound (100,000) when the policy names none; a Redis store has no bound
    // of its own: the replay's (1,000,000).
    expect(await denied(['-c', file('default.yaml', `rules:\n${rules}`)])).toBe(1)
    expect(await denied(['-c', file('redis.yaml', `store: redis://127.0.0.1:1\nrules:\n${rules}`)])).toBe(1)
  })

  test('requests keyed by client for want of the header, query parameter or host a rule reads are counted and said', async () => {
    // An access log carries no header but the user agent: every request of a header-keyed rule
    // was keyed by its address, and nothing said so.
    const t = Date.UTC(2026, 0, 1)
    const clf = file(
      'no-header.log',
      [line('10.0.0.1', t), line('10.0.0.2', t + 1), line('10.0.0.1', t + 2)].join(''),
    )
    const io = captureIo(dir)
    const json = path.join(dir, 'no-header.json')
    const args = ['--key', 'header:x-api-key', '--no-html', '--no-progress', '--json', json]
    expect(await runReplay([clf, ...args], io)).toBe(0)
    expect(io.out()).toContain(
      '\n"sliding-window": 3 of 3 requests had no header:x-api-key: keyed by client address (fallback|ip=…), as the gateway keys them\n',
    )
    expect((JSON.parse(readFileSync(json, 'utf8')) as ReplayResult).rules[0]?.fellBack).toBe(3)
    // Lines that carry it: nothing to say.
    const jsonl = file(
      'with-header.jsonl',
      `${JSON.stringify({ time: t, ip: '10.0.0.1', path: '/', http_x_api_key: 'k1' })}\n`,
    )
    const carried = captureIo(dir)
    expect(await runReplay([jsonl, ...args], carried)).toBe(0)
    expect(carried.out()).not.toContain('keyed by client address')
    expect((JSON.parse(readFileSync(json, 'utf8')) as ReplayResult).rules[0]?.fellBack).toBe(0)
    // A rule keyed by address alone never falls back.
    const ip = await replayLog({ inputs: [clf], rules: perIp(100) })
    expect(ip.rules[0]?.fellBack).toBe(0)
  })

  test('"Top keys blocked" gives each key its request count, busiest key or not', async () => {
    const io = captureIo(dir)
    const args = ['--limit', '20', '--window', '1m', '--algorithm', 'fixed-window', '--top', '3']
    const json = path.join(dir, 'top-blocked.json')
    expect(await runReplay([SAMPLE, ...args, '--no-html', '--no-progress', '--json', json], io)).toBe(0)
    const rule = (JSON.parse(readFileSync(json, 'utf8')) as ReplayResult).rules[0]
    const text = sample.toString('utf8')
    const linesOf = (ip: string) => text.split('\n').filter((l) => l.startsWith(`${ip} `)).length
    expect(rule?.topDenied).toHaveLength(3)
    for (const [key, , , requests] of rule?.topDenied ?? []) expect(requests).toBe(linesOf(key))
    // Not all of them among the 3 busiest keys, yet none without its count.
    expect(rule?.topDenied.some(([k]) => !rule.topKeys.some(([b]) => b === k))).toBe(true)
    const table = io.out().slice(io.out().indexOf('Top keys blocked'), io.out().indexOf('Timeline'))
    expect(table).not.toContain('—')
    for (const [key, , , requests] of rule?.topDenied ?? [])
      expect(table).toMatch(
        new RegExp(`${key.replace(/\./g, '\\.')}\\s+[\\d,]+\\s+${(requests ?? 0).toLocaleString('en-US')}\n`),
      )
  })

  test('usage and input errors exit 2 with a message', async () => {
    const cases: [string[], RegExp][] = [
      [[], /no log file given/],
      [['missing.log'], /ENOENT/],
      [[SAMPLE, '--mode', 'strict'], /--mode: expected shadow or enforce/],
      [[SAMPLE, '--bogus'], /Unknown option '--bogus'/],
      [[SAMPLE, '--field', 'when=ts'], /--field: expected/],
      [[SAMPLE, '--reorder', 'soon'], /--reorder: expected a duration/],
      // A flag, not the policy: it said "Invalid policy … or whole milliseconds …, got "60000"".
      [
        [SAMPLE, '--window', '60000'],
        /^edgelimit replay: --window: expected a duration like 60s, got "60000"\n$/,
      ],
      // Past the memory store's bound: thrown as a bug (exit 1, "edgelimit: Invalid edgelimit options").
      [
        [SAMPLE, '--max-keys', '3000000000'],
        /^edgelimit replay: --max-keys: expected a positive whole number up to 2147483647, got "3000000000"\n$/,
      ],
      // A directory opens, but reading it fails with a message that names no file.
      [
        [SAMPLE, dir],
        new RegExp(
          `^edgelimit replay: ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: a directory, not a log file\n$`,
        ),
      ],
      [
        [
          SAMPLE,
          '--config',
          file('bad.yaml', 'rules:\n  - name: x\n    algorithm: sliding-window\n    limit: 0\n'),
        ],
        /bad\.yaml:\d+:\d+\s+rules\[0\]/,
      ],
      // The one-rule flags and a policy contradict each other: the policy would be run, silently.
      [
        [SAMPLE, '-c', 'good.yaml', '--limit', '999', '--key', 'header:x'],
        /^edgelimit replay: --limit and --key describe the one rule replayed without --config; the policy's rules are replayed instead: give one or the other\n$/,
      ],
      [
        [SAMPLE, '--config=good.yaml', '--algorithm', 'gcra'],
        /^edgelimit replay: --algorithm describes the one rule/,
      ],
      [[SAMPLE, '-c', 'good.yaml', '--window', '1s'], /^edgelimit replay: --window describes the one rule/],
    ]
    file('good.yaml', 'rules:\n  - { name: x, algorithm: fixed-window, limit: 1, window: 1m }\n')
    for (const [args, message] of cases) {
      const io = captureIo(dir)
      expect(await runReplay(args, io), args.join(' ')).toBe(2)
      expect(io.err()).toMatch(message)
    }
    const help = captureIo(dir)
    expect(await runReplay(['--help'], help)).toBe(0)
    expect(help.out()).toContain('Usage: edgelimit replay')
    // Every field --field takes (its usage error lists them) is in the help.
    const fields = /--field <name=source>[^:]*: ([\s\S]*?) \(e\.g\./.exec(help.out())?.[1]?.split(/,\s+/)
    expect(fields).toEqual(['time', 'ip', 'user', 'method', 'path', 'status', 'userAgent', 'host', 'query'])
  })

  test('a file that cannot be reached (a symbolic link loop, a name too long) is an input error (exit 2), before the run', async () => {
    // They were thrown as bugs (exit 1, "edgelimit: ELOOP: …"); an output only after the replay.
    const loop = path.join(dir, 'loop-a')
    symlinkSync(path.join(dir, 'loop-b'), loop)
    symlinkSync(loop, path.join(dir, 'loop-b'))
    const long = path.join(dir, 'x'.repeat(300))
    const cases: [string[], RegExp][] = [
      [[loop], /^edgelimit replay: ELOOP: .*loop-a/],
      [[long], /^edgelimit replay: ENAMETOOLONG: /],
      [[SAMPLE, '--json', loop], /^edgelimit replay: ELOOP: .*loop-a/],
      [[SAMPLE, '--json', path.join(loop, 'r.json')], /^edgelimit replay: ELOOP: .*loop-a/],
      [[SAMPLE, '--html', long], /^edgelimit replay: ENAMETOOLONG: /],
    ]
    for (const [args, message] of cases) {
      const io = captureIo(dir)
      expect(await runReplay([...args, '--no-progress'], io), args.join(' ')).toBe(2)
      expect(io.err()).toMatch(message)
      // Stopped before the run: no report.
      expect(io.out()).toBe('')
    }
    for (const args of [
      ['--trace', loop],
      ['--trace', long],
      ['steady', '--json', loop],
    ]) {
      const io = captureIo(dir)
      expect(await runSimulate([...args, '--no-html'], io), args.join(' ')).toBe(2)
      expect(io.err()).toMatch(/^edgelimit simulate: E(LOOP|NAMETOOLONG): /)
    }
  })

  test('--limit is a whole number in digits up to 2147483647; the error quotes what was typed', async () => {
    for (const typed of ['1e3', '0x10', '', 'abc', ' 5', '2.5', '-3', '0', '2147483648']) {
      const io = captureIo(dir)
      expect(await runReplay([SAMPLE, `--limit=${typed}`, '--no-html', '--no-progress'], io), typed).toBe(2)
      expect(io.err()).toBe(
        `edgelimit replay: --limit: expected a positive whole number up to 2147483647, got "${typed}"\n`,
      )
    }
    // Digits, with _ between groups as the other number flags take them.
    for (const [typed, limit] of [
      ['2147483647', 2_147_483_647],
      ['1_000', 1000],
    ] as const) {
      const json = path.join(dir, `limit-${limit}.json`)
      const io = captureIo(dir)
      expect(
        await runReplay([SAMPLE, '--limit', typed, '--no-html', '--no-progress', '--json', json], io),
      ).toBe(0)
      expect(readFileSync(json, 'utf8')).toContain(`"limit": ${limit}`)
    }
  })
})

/** A result without its timing. */
function strip(r: ReplayResult) {
  const { elapsedMs: _, ...rest } = r
  return { ...rest, malformed: { ...rest.malformed, examples: [] } }
}
