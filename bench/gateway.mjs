// The gateway in front of one origin, side by side with a plain proxy and nginx limit_req.
//
//   npm run bench:gateway                     (builds edgelimit and the gateway first)
//   node bench/gateway.mjs [--quick] [--no-write] [--only <id,id>]
//
// Contestants, each in front of the same origin (bench/gateway/origin.mjs, its own process):
//   direct   wrk → origin
//   plain    a plain undici reverse proxy, no limiting (bench/gateway/plain-proxy.mjs)
//   memory   edgelimit serve, memory store (bench/gateway/memory.yaml)
//   redis    edgelimit serve, Redis store (bench/gateway/redis.yaml; redis-server started here)
//   nginx    Debian nginx, limit_req (leaky bucket, per client address) + upstream keepalive
// One leaky bucket per client address everywhere, with a rate no run reaches: every request is
// decided and admitted (a non-2xx answer is counted and reported).
//
// The machine is shared (2 cores, other work running): single runs swing by ±25 %, so every
// comparison is paired and repeated. Each round:
//   1. throughput: each contestant alone, in a fresh process: warm-up, then wrk (requests/s and
//      p50/p99 at saturation, 50 connections). The order alternates between rounds (memory is
//      always next to the plain proxy and to nginx), so drift hits both sides of a ratio alike.
//   2. latency: all contestants at once, fresh processes (each warmed with 1 s of wrk), one
//      open-loop probe sending 500 requests/s to each in turn, in rotating order
//      (bench/gateway/probe.mjs): the same seconds of machine load for everyone.
// Reported: throughput of each contestant's best round (house style); latency percentiles of
// every sample of every round pooled (a stall of a few ms lands in some round's p99 at random;
// pooling averages it out). Targets: the median over rounds of the paired per-round throughput
// ratios (memory/plain, memory/nginx), and the pooled p99 difference (memory − plain).
// Node proxies and nginx each get one core's worth: one event loop / worker_processes 1.
//
// Writes bench/results/gateway-<YYYY-MM-DD>.json and .md (UTC date).

import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { median } from './lib/machine.mjs'

const SELF = fileURLToPath(import.meta.url)
const ROOT = path.resolve(path.dirname(SELF), '..')
const HERE = path.join(ROOT, 'bench', 'gateway')
const RESULTS = path.join(ROOT, 'bench', 'results')
const CLI = path.join(ROOT, 'packages', 'gateway', 'dist', 'cli.js')

const args = process.argv.slice(2)
const QUICK = args.includes('--quick')
const WRITE = !args.includes('--no-write')
const ONLY = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : undefined

const ROUNDS = QUICK ? 1 : 6
const WARMUP_S = QUICK ? 1 : 2
const WRK_S = QUICK ? 3 : 5
const CONNECTIONS = 50
const PROBE_RATE = 500
const PROBE_S = QUICK ? 3 : 6
const PROBE_WARMUP_S = 1

const TARGETS = [
  { id: 'plain', text: 'edgelimit (memory) ≥ 85 % of the plain proxy’s throughput', ratio: 0.85 },
  { id: 'nginx', text: 'edgelimit (memory) ≥ 50 % of nginx limit_req’s throughput', ratio: 0.5 },
  { id: 'p99', text: 'p99 added latency ≤ 2 ms over the plain proxy (fixed rate, same window)', ms: 2 },
]

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

const children = new Set()
function killAll() {
  for (const child of children) child.kill('SIGKILL')
}
process.on('exit', killAll)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll()
    process.exit(130)
  })
}

function start(command, argv, options = {}) {
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], ...options })
  children.add(child)
  let output = ''
  child.stdout.on('data', (c) => {
    output += c
  })
  child.stderr.on('data', (c) => {
    output += c
  })
  child.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)))
  child.exited.then(() => children.delete(child))
  child.output = () => output
  return child
}

async function stop(child, signal = 'SIGTERM') {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
  await child.exited
  clearTimeout(timer)
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** Waits until `url` answers 2xx (the process is up and forwarding). */
async function ready(url, child, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (child !== undefined && child.exitCode !== null) throw new Error(`exited early:\n${child.output()}`)
    try {
      const response = await fetch(url, { headers: { connection: 'close' } })
      await response.arrayBuffer()
      if (response.ok) return
    } catch {}
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms${child ? `:\n${child.output()}` : ''}`)
}

function run(command, argv, options = {}) {
  return new Promise((resolve, reject) => {
    const child = start(command, argv, options)
    child.exited.then((code) =>
      code === 0
        ? resolve(child.output())
        : reject(new Error(`${command} exited ${code}:\n${child.output()}`)),
    )
  })
}

// ---------------------------------------------------------------------------------------------
// Measurements
// ---------------------------------------------------------------------------------------------

/** wrk's durations (`812.00us`, `1.23ms`, `2.00s`) in milliseconds. */
function ms(text) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (m === null) return null
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[m[2]]
}

async function wrk(url, seconds) {
  const out = await run('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', url])
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
  const p50 = ms(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? '')
  const p99 = ms(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? '')
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const errors = socket === null ? 0 : socket.slice(1).reduce((a, b) => a + Number(b), 0)
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
  return { rps, p50, p99, requests, non2xx, errors }
}

/** Latency of every url in the same window; one result per url, in order. */
async function probe(urls) {
  const out = await run(process.execPath, [
    path.join(HERE, 'probe.mjs'),
    String(PROBE_RATE),
    String(PROBE_S),
    String(PROBE_WARMUP_S),
    ...urls,
  ])
  const lines = out
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
  return urls.map((url) => lines.find((l) => l.url === url))
}

// ---------------------------------------------------------------------------------------------
// Contestants
// ---------------------------------------------------------------------------------------------

function nginxConfig(dir, port, originPort) {
  const root = process.getuid?.() === 0 ? 'user root root;\n' : ''
  return `${root}worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  limit_req_zone $binary_remote_addr zone=bench:10m rate=100000000r/s;
  upstream origin {
    server 127.0.0.1:${originPort};
    keepalive 128;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      limit_req zone=bench burst=1000000 nodelay;
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`
}

function contestants(origin, redisUrl, scratch) {
  const gateway =
    (config, env = {}) =>
    async (port) =>
      start(
        process.execPath,
        [
          CLI,
          'serve',
          '--config',
          config,
          '--upstream',
          origin,
          '--port',
          String(port),
          '--admin-port',
          '0',
        ].concat(['--log-level', 'warn', '--no-watch', '-q']),
        { env: { ...process.env, ...env }, cwd: ROOT },
      )
  return [
    { id: 'direct', label: 'direct origin', what: 'wrk → origin' },
    {
      id: 'plain',
      label: 'plain undici proxy',
      what: 'node:http + undici Pool, no limiting',
      start: async (port) =>
        start(process.execPath, [path.join(HERE, 'plain-proxy.mjs'), String(port), origin]),
    },
    {
      id: 'memory',
      label: 'edgelimit (memory)',
      what: 'edgelimit serve, bench/gateway/memory.yaml',
      start: gateway('bench/gateway/memory.yaml'),
    },
    {
      id: 'nginx',
      label: 'nginx limit_req',
      what: 'nginx, worker_processes 1, limit_req burst nodelay, upstream keepalive',
      start: async (port) => {
        const dir = mkdtempSync(path.join(scratch, 'nginx-'))
        writeFileSync(path.join(dir, 'nginx.conf'), nginxConfig(dir, port, new URL(origin).port))
        const child = start('nginx', ['-p', `${dir}/`, '-c', path.join(dir, 'nginx.conf')])
        child.stopSignal = 'SIGQUIT'
        return child
      },
    },
    {
      id: 'redis',
      label: 'edgelimit (Redis)',
      what: 'edgelimit serve, bench/gateway/redis.yaml, local redis-server',
      start: gateway('bench/gateway/redis.yaml', { REDIS_URL: redisUrl }),
    },
  ].filter((c) => ONLY === undefined || ONLY.includes(c.id) || c.id === 'plain' || c.id === 'memory')
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

/** The first line a tool prints about its version (nginx and wrk print it on stderr). */
function versionOf(command, argv) {
  const result = spawnSync(command, argv, { encoding: 'utf8' })
  return `${result.stdout ?? ''}${result.stderr ?? ''}`.trim().split('\n')[0] ?? 'unknown'
}

function git() {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim()
    const dirty = execFileSync(
      'git',
      ['status', '--porcelain', '--', 'packages', 'bench/gateway', 'bench/gateway.mjs'],
      {
        cwd: ROOT,
        encoding: 'utf8',
      },
    )
      .split('\n')
      .filter(Boolean).length
    return { commit, dirtyFiles: dirty }
  } catch {
    return { commit: 'unknown', dirtyFiles: 0 }
  }
}

function buildHash() {
  const hash = createHash('sha256')
  for (const dir of ['packages/edgelimit/dist', 'packages/gateway/dist']) {
    const full = path.join(ROOT, dir)
    if (!existsSync(full)) continue
    for (const file of readdirSync(full)
      .filter((f) => f.endsWith('.js'))
      .sort())
      hash.update(readFileSync(path.join(full, file)))
  }
  return hash.digest('hex').slice(0, 16)
}

const fmt = {
  rps: (x) => (x >= 1000 ? `${(x / 1000).toFixed(2)} k/s` : `${x.toFixed(0)} /s`),
  ms: (x) => (x === null || x === undefined ? '—' : `${x.toFixed(2)} ms`),
  pct: (x) => `${(x * 100).toFixed(0)} %`,
}

function markdown(report) {
  const lines = [
    `# Gateway benchmark — ${report.date}`,
    '',
    `- Command: \`${report.command}\`; ${report.settings.rounds} round(s); throughput: each contestant's best round; latency: every round's samples pooled`,
    `- Node ${report.machine.node}, ${report.machine.platform}; CPU: ${report.machine.cpu} × ${report.machine.cores}; ${report.machine.nginx}; ${report.machine.wrk}; ${report.machine.redis}`,
    `- Load average (1/5/15 min) ${report.load.before.join(' / ')} before, ${report.load.after.join(' / ')} after — 2 cores shared by the load generator, the origin, the proxies and other work: single runs swing by ±25 %, hence paired rounds and medians`,
    `- edgelimit at ${report.git.commit}${report.git.dirtyFiles ? ` with ${report.git.dirtyFiles} uncommitted file(s) under packages/ and bench/gateway` : ''}; build hash ${report.buildHash}`,
    `- Throughput: each contestant alone in a fresh process, \`wrk -t1 -c${CONNECTIONS} -d${WRK_S}s --latency\` after a ${WARMUP_S} s warm-up; order alternating between rounds`,
    `- Latency: every contestant at once (fresh processes), one open-loop probe sending ${PROBE_RATE} requests/s to each in turn (rotating order) for ${PROBE_S} s after ${PROBE_WARMUP_S} s of warm-up, each request timed from when it was due; percentiles over all rounds' samples`,
    '',
    `| contestant | what | requests/s | p50 (wrk) | p99 (wrk) | p50 @${PROBE_RATE}/s | p99 @${PROBE_RATE}/s | non-2xx / errors |`,
    '| :--- | :--- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ]
  for (const c of report.summary) {
    lines.push(
      `| ${c.label} | ${c.what} | ${fmt.rps(c.rps)} | ${fmt.ms(c.p50)} | ${fmt.ms(c.p99)} | ${fmt.ms(c.probeP50)} | ${fmt.ms(c.probeP99)} | ${c.non2xx} / ${c.errors} |`,
    )
  }
  lines.push('', '## Targets', '', '| target | measured | result |', '| :--- | :--- | :--- |')
  for (const t of report.targets)
    lines.push(`| ${t.text} | ${t.measured} | **${t.pass ? 'PASS' : 'FAIL'}** |`)
  lines.push(
    '',
    '## Every round',
    '',
    `| round | contestant | requests/s | p50 | p99 | p50 @${PROBE_RATE}/s | p99 @${PROBE_RATE}/s |`,
    '| ---: | :--- | ---: | ---: | ---: | ---: | ---: |',
  )
  for (const r of report.runs) {
    lines.push(
      `| ${r.round} | ${r.label} | ${fmt.rps(r.wrk.rps)} | ${fmt.ms(r.wrk.p50)} | ${fmt.ms(r.wrk.p99)} | ${fmt.ms(r.probe.p50)} | ${fmt.ms(r.probe.p99)} |`,
    )
  }
  return `${lines.join('\n')}\n`
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async function main() {
  if (!existsSync(CLI))
    throw new Error(`${CLI} is missing: run \`npm run build\` (npm run bench:gateway does)`)
  for (const tool of ['wrk', 'nginx', 'redis-server']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' })
    } catch {
      throw new Error(`${tool} is not installed (apt-get install -y nginx wrk redis-server)`)
    }
  }
  const started = Date.now()
  const loadBefore = os.loadavg().map((x) => Number(x.toFixed(2)))
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-bench-gateway-'))
  const originPort = await freePort()
  const origin = start(process.execPath, [path.join(HERE, 'origin.mjs'), String(originPort)])
  const originUrl = `http://127.0.0.1:${originPort}`
  const redisPort = await freePort()
  const redis = start('redis-server', [
    '--port',
    String(redisPort),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    scratch,
  ])
  const runs = []
  try {
    await ready(`${originUrl}/`, origin)
    await new Promise((r) => setTimeout(r, 300))
    const list = contestants(originUrl, `redis://127.0.0.1:${redisPort}`, scratch)
    const launch = async (c) => {
      const port = c.start === undefined ? originPort : await freePort()
      const child = c.start === undefined ? undefined : await c.start(port)
      const url = `http://127.0.0.1:${port}/`
      await ready(url, child)
      return { url, stop: () => (child === undefined ? undefined : stop(child, child.stopSignal)) }
    }
    /** Every latency sample of every round, per contestant. */
    const pooled = new Map()
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? list : [...list].reverse()
      const results = new Map()
      for (const c of order) {
        const running = await launch(c)
        try {
          await wrk(running.url, WARMUP_S)
          results.set(c.id, await wrk(running.url, WRK_S))
        } finally {
          await running.stop()
        }
      }
      const all = []
      try {
        for (const c of list) all.push(await launch(c))
        // Fresh processes: JIT-warm each one first, as the throughput phase does.
        for (const r of all) await wrk(r.url, 1)
        const latencies = await probe(all.map((r) => r.url))
        for (const [i, c] of list.entries()) {
          const w = results.get(c.id)
          const p = latencies[i]
          const { samples, ...probeSummary } = p
          pooled.set(c.id, [...(pooled.get(c.id) ?? []), ...samples])
          runs.push({ round, id: c.id, label: c.label, wrk: w, probe: probeSummary })
          process.stdout.write(
            `round ${round}  ${c.label.padEnd(20)} ${fmt.rps(w.rps).padStart(10)}  p50 ${fmt.ms(w.p50)}  p99 ${fmt.ms(w.p99)}  |  @${PROBE_RATE}/s p50 ${fmt.ms(p.p50)} p99 ${fmt.ms(p.p99)}${w.non2xx + w.errors + p.non2xx + p.errors > 0 ? `  (non-2xx ${w.non2xx + p.non2xx}, errors ${w.errors + p.errors})` : ''}\n`,
          )
        }
      } finally {
        await Promise.all(all.map((r) => r.stop()))
      }
    }
    const summary = list.map((c) => {
      const mine = runs.filter((r) => r.id === c.id)
      const best = mine.reduce((a, b) => (b.wrk.rps > a.wrk.rps ? b : a))
      const samples = [...(pooled.get(c.id) ?? [])].sort((a, b) => a - b)
      const at = (q) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? null
      return {
        id: c.id,
        label: c.label,
        what: c.what,
        rps: best.wrk.rps,
        p50: best.wrk.p50,
        p99: best.wrk.p99,
        probeP50: at(0.5),
        probeP99: at(0.99),
        probeSamples: samples.length,
        non2xx: mine.reduce((n, r) => n + r.wrk.non2xx + r.probe.non2xx, 0),
        errors: mine.reduce((n, r) => n + r.wrk.errors + r.probe.errors, 0),
      }
    })
    const by = Object.fromEntries(summary.map((s) => [s.id, s]))
    /** Per round, f(memory run, other run); the median over rounds and every value. */
    const paired = (other, f) => {
      const values = []
      for (let round = 1; round <= ROUNDS; round++) {
        const m = runs.find((r) => r.round === round && r.id === 'memory')
        const o = runs.find((r) => r.round === round && r.id === other)
        if (m !== undefined && o !== undefined) values.push(f(m, o))
      }
      return { median: median(values), values }
    }
    const targets = []
    /** The gateway's requests/s as a share of `other`'s: median of the paired rounds. */
    const rpsShare = (target, other) => {
      const r = paired(other, (m, o) => m.wrk.rps / o.wrk.rps)
      targets.push({
        ...target,
        value: r.median,
        rounds: r.values,
        measured: `${fmt.pct(r.median)} median of ${r.values.length} paired rounds (${r.values.map(fmt.pct).join(', ')}); best runs ${fmt.rps(by.memory.rps)} vs ${fmt.rps(by[other].rps)} = ${fmt.pct(by.memory.rps / by[other].rps)}`,
        pass: r.median >= target.ratio,
      })
    }
    if (by.memory && by.plain) rpsShare(TARGETS[0], 'plain')
    if (by.memory && by.nginx) rpsShare(TARGETS[1], 'nginx')
    if (by.memory && by.plain) {
      const added = by.memory.probeP99 - by.plain.probeP99
      const r = paired('plain', (m, o) => m.probe.p99 - o.probe.p99)
      const signed = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(2)} ms`
      targets.push({
        ...TARGETS[2],
        value: added,
        rounds: r.values,
        measured: `${signed(added)} (p99 of ${by.memory.probeSamples} pooled samples: ${fmt.ms(by.memory.probeP99)} vs ${fmt.ms(by.plain.probeP99)}); per round ${r.values.map(signed).join(', ')}`,
        pass: added <= TARGETS[2].ms,
      })
    }
    const date = new Date().toISOString().slice(0, 10)
    const report = {
      date,
      command: `npm run bench:gateway (node bench/gateway.mjs${args.length ? ` ${args.join(' ')}` : ''})`,
      seconds: Math.round((Date.now() - started) / 1000),
      machine: {
        node: process.version,
        platform: `${os.platform()} ${os.release()} ${os.arch()}`,
        cpu: os.cpus()[0]?.model ?? 'unknown',
        cores: os.cpus().length,
        nginx: versionOf('nginx', ['-v']),
        wrk: versionOf('wrk', ['--version']).replace(/ Copyright.*/, ''),
        redis: versionOf('redis-server', ['--version']),
      },
      load: { before: loadBefore, after: os.loadavg().map((x) => Number(x.toFixed(2))) },
      git: git(),
      buildHash: buildHash(),
      settings: {
        rounds: ROUNDS,
        warmupSeconds: WARMUP_S,
        wrkSeconds: WRK_S,
        connections: CONNECTIONS,
        probeRate: PROBE_RATE,
        probeSeconds: PROBE_S,
      },
      summary,
      targets,
      runs,
    }
    const md = markdown(report)
    process.stdout.write(`\n${md}`)
    for (const t of targets) process.stdout.write(`${t.pass ? 'PASS' : 'FAIL'}  ${t.text}: ${t.measured}\n`)
    if (WRITE) {
      mkdirSync(RESULTS, { recursive: true })
      writeFileSync(path.join(RESULTS, `gateway-${date}.json`), `${JSON.stringify(report, null, 2)}\n`)
      writeFileSync(path.join(RESULTS, `gateway-${date}.md`), md)
      process.stdout.write(`\nwrote bench/results/gateway-${date}.json and .md\n`)
    }
    process.exitCode = targets.every((t) => t.pass) ? 0 : 1
  } finally {
    await stop(origin)
    await stop(redis)
    rmSync(scratch, { recursive: true, force: true })
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`)
  process.exitCode = 2
})
