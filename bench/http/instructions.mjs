// Instructions per request under callgrind: the deterministic companion of bench:http.
//
//   npm run bench:http:instructions          (builds edgelimit first)
//   node bench/http/instructions.mjs [--only <framework>[,<framework>…]] [--rows <kind>[,<kind>…]]
//                                    [--deny] [--connections <n>] [--warm <n>] [--requests <n>]
//                                    [--dist <dir>] [--keep <dir>] [--no-write]
//
//   --only         frameworks to run (node, express, fastify, hono, fetch; default all)
//   --rows         which servers of each framework: bare (no edgelimit), adapter, control (the
//                  fields by hand); default all three (--deny: bare and adapter, no control)
//   --deny         the 429 path: every request goes to `/deny`, a route limited to 1 per hour
//                  (scenario deny of server.mjs), so all but the first are denied; the bare server
//                  answers it 200
//   --connections  keep-alive connections of the load (default 16); 1 gives counts that repeat
//                  within about 0.5 %, as requests then never overlap
//   --dist         the built library to measure (default packages/edgelimit/dist), e.g. a copy of
//                  an earlier build for a before/after pair
//   --keep         keeps each run's callgrind output in this directory, named
//                  <adapter>-<bare|limited>-<scenario>-<requests>.out: a per-function profile of one
//                  request is the difference of a pair (callgrind_annotate each, subtract)
//
// bench:http measures requests per second on a shared 2-core VM, whose speed drifts by tens of
// percent from one second to the next. This counts instead: each server of bench:http
// (bench/http/server.mjs, the same cases) runs under `valgrind --tool=callgrind` twice, once
// answering WARM requests and once WARM + REQUESTS; the difference of the two instruction totals,
// divided by REQUESTS, is what one more request costs once the JIT has settled. The count is the
// same from run to run within about 1 % whatever else the machine does. It covers the server's
// user space only (Node, V8, libuv, the JIT's code, edgelimit), not the kernel's socket work, so
// `without / with` here is what the throughput ratio would be if user-space instructions were
// all a request cost: a floor-free view of what each adapter adds, beside its control row.
//
// Writes bench/results/http-instructions-<YYYY-MM-DD>.json and .md (UTC date).

import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { flagValue, runMeta, snapshotEdgelimit, table, writeResults } from '../lib/machine.mjs'
import { ADAPTERS, CONTROL_OF } from './adapters.mjs'

const SELF = fileURLToPath(import.meta.url)
const SERVER = path.join(path.dirname(SELF), 'server.mjs')

/** Per framework: the server without edgelimit, with its adapter, and with the fields by hand. */
const FRAMEWORKS = Object.fromEntries(
  Object.entries(ADAPTERS)
    .filter(([, a]) => a.control !== true)
    .map(([name, a]) => [name, { label: a.label, control: CONTROL_OF[name] }]),
)

/** The servers `--rows` picks from, per framework. */
const ROWS = ['bare', 'adapter', 'control']

function parseArgs(argv) {
  const value = (name, fallback) => flagValue(argv, name, fallback)
  const count = (name, fallback) => {
    const n = Number(value(name, fallback))
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name}: expected a positive whole number`)
    return n
  }
  const only = value('--only', undefined)?.split(',')
  const unknown = only?.filter((f) => !(f in FRAMEWORKS)) ?? []
  if (unknown.length > 0)
    throw new Error(`--only: unknown ${unknown.join(', ')} (known: ${Object.keys(FRAMEWORKS).join(', ')})`)
  const deny = argv.includes('--deny')
  const rows = value('--rows', deny ? 'bare,adapter' : 'bare,adapter,control').split(',')
  const badRows = rows.filter((r) => !ROWS.includes(r))
  if (badRows.length > 0) throw new Error(`--rows: unknown ${badRows.join(', ')} (known: ${ROWS.join(', ')})`)
  if (deny && rows.includes('control'))
    throw new Error(
      '--rows: the control rows set the fields of an admitted request; there is none with --deny',
    )
  return {
    frameworks: only ?? Object.keys(FRAMEWORKS),
    rows,
    deny,
    connections: count('--connections', 16),
    warm: count('--warm', 10_000),
    requests: count('--requests', 20_000),
    dist: value('--dist', undefined),
    keep: value('--keep', undefined),
    write: !argv.includes('--no-write'),
  }
}

function valgrindVersion() {
  try {
    return execFileSync('valgrind', ['--version'], { encoding: 'utf8' }).trim()
  } catch {
    return null
  }
}

/**
 * Sends `count` GET requests to `target` over `connections` keep-alive connections; rejects on any
 * status but 200 and, when `denied` is given, 429 (which it counts).
 */
function send(port, count, { target = '/', connections = 16, denied } = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  let started = 0
  let done = 0
  return new Promise((resolve, reject) => {
    const next = () => {
      if (started === count) return
      started++
      http
        .get({ host: '127.0.0.1', port, path: target, agent }, (res) => {
          res.resume()
          res.on('end', () => {
            if (res.statusCode === 429 && denied !== undefined) denied.count++
            else if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`))
            if (++done === count) resolve()
            else next()
          })
        })
        .on('error', reject)
    }
    for (let i = 0; i < connections; i++) next()
  }).finally(() => agent.destroy())
}

/** One server under callgrind answering `count` requests; resolves its total instruction count. */
async function instructions(spec, count, opts) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-callgrind-'))
  try {
    // --single-threaded: V8 compiles and collects on the main thread, so the count does not
    // depend on how background threads were scheduled.
    const child = spawn(
      'valgrind',
      [
        '--tool=callgrind',
        '-q',
        `--callgrind-out-file=${path.join(dir, 'callgrind.out')}`,
        process.execPath,
        '--single-threaded',
        SERVER,
        JSON.stringify(spec),
      ],
      { stdio: ['pipe', 'pipe', 'ignore'] },
    )
    const exited = new Promise((resolve) => child.once('exit', resolve))
    const lines = createInterface({ input: child.stdout })
    const port = await new Promise((resolve, reject) => {
      lines.once('line', (line) => resolve(JSON.parse(line).port))
      exited.then((code) => reject(new Error(`server ${spec.adapter} exited with ${code} before listening`)))
    })
    const denied = { count: 0 }
    await send(port, count, { target: opts.deny ? '/deny' : '/', connections: opts.connections, denied })
    // Without the adapter nothing is denied; with it, all but the first request to /deny, and one
    // more when the run crosses the top of the hour (its window; a run lasts less than an hour).
    const expected = opts.deny && spec.limited ? count - 1 : 0
    if (denied.count > expected || denied.count < expected - (expected > 0 ? 1 : 0))
      throw new Error(`${spec.adapter}: ${denied.count} of ${count} requests denied, expected ${expected}`)
    child.stdin.end() // the server exits; callgrind writes its totals
    await exited
    const file = readdirSync(dir).find((f) => f.startsWith('callgrind.out'))
    if (opts.keep !== undefined && file !== undefined) {
      mkdirSync(opts.keep, { recursive: true })
      const kind = spec.limited ? 'limited' : 'bare'
      copyFileSync(
        path.join(dir, file),
        path.join(opts.keep, `${spec.adapter}-${kind}-${spec.scenario}-${count}.out`),
      )
    }
    const totals = /^totals:\s+(\d+)/m.exec(readFileSync(path.join(dir, file ?? ''), 'utf8'))
    if (totals === null) throw new Error(`no totals in the callgrind output of ${spec.adapter}`)
    return Number(totals[1])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Instructions per request at steady state: (run of warm + requests) − (run of warm), per request. */
async function perRequest(spec, opts) {
  const t0 = Date.now()
  const short = await instructions(spec, opts.warm, opts)
  const long = await instructions(spec, opts.warm + opts.requests, opts)
  const per = (long - short) / opts.requests
  process.stderr.write(
    `${spec.adapter.padEnd(15)} ${spec.limited ? 'limited' : 'bare   '} ${spec.scenario.padEnd(5)} ${Math.round(per).toLocaleString('en-US').padStart(7)} instructions/request  ${((Date.now() - t0) / 1000).toFixed(0)} s\n`,
  )
  return per
}

async function main(argv) {
  const opts = parseArgs(argv)
  const valgrind = valgrindVersion()
  if (valgrind === null) {
    console.error('valgrind is not installed: apt-get install valgrind')
    process.exitCode = 2
    return
  }
  const started = Date.now()
  const loadBefore = os.loadavg()
  const snapshot = await snapshotEdgelimit([], undefined, { from: opts.dist })
  const scenario = opts.deny ? 'deny' : 'admit'
  const results = []
  try {
    const spec = (adapter, limited) => ({ adapter, limited, scenario, dist: snapshot.dir })
    for (const framework of opts.frameworks) {
      const { label, control } = FRAMEWORKS[framework]
      const without = opts.rows.includes('bare') ? await perRequest(spec(framework, false), opts) : null
      const row = (kind, adapter, withCount) => ({
        framework,
        kind,
        scenario,
        label: kind === 'adapter' ? label : `control: ${label}, the two draft-10 fields by hand`,
        withoutPerRequest: without,
        withPerRequest: withCount,
        addedPerRequest: without === null ? null : withCount - without,
        ratio: without === null ? null : without / withCount,
        adapter,
      })
      if (opts.rows.includes('adapter'))
        results.push(row('adapter', framework, await perRequest(spec(framework, true), opts)))
      if (control !== undefined && opts.rows.includes('control'))
        results.push(row('control', control, await perRequest(spec(control, true), opts)))
    }
  } finally {
    rmSync(snapshot.dir, { recursive: true, force: true })
  }

  const n = (x) => (x === null ? '—' : Math.round(x).toLocaleString('en-US'))
  const header = ['row', 'without (instr/req)', 'with (instr/req)', 'added', 'without / with']
  const rows = results.map((r) => [
    opts.deny ? `${r.label}, denied` : r.label,
    n(r.withoutPerRequest),
    n(r.withPerRequest),
    r.addedPerRequest === null ? '—' : `+${n(r.addedPerRequest)}`,
    r.ratio === null ? '—' : `${(r.ratio * 100).toFixed(1)}%`,
  ])
  const out = table(header, rows, ['l', 'r', 'r', 'r', 'r'])
  const meta = runMeta({
    script: 'bench/http/instructions.mjs',
    argv,
    started,
    loadBefore,
    dirtyPaths: ['packages/edgelimit/src'],
    snapshotHash: snapshot.hash,
    snapshotHead: snapshot.head,
    packages: ['express', 'fastify', 'hono', '@hono/node-server'],
  })
  console.log(
    `\nedgelimit HTTP adapters, user-space instructions per request (callgrind; scenario ${scenario}, ${opts.connections} connection${opts.connections === 1 ? '' : 's'}, ${opts.warm} warm-up, ${opts.requests} counted) — ${meta.date}, Node ${meta.node}\n`,
  )
  console.log(out.text)
  if (!opts.write) return
  const method = {
    tool: valgrind,
    server: `bench/http/server.mjs, scenario ${scenario} (as bench:http)`,
    command: `valgrind --tool=callgrind node --single-threaded bench/http/server.mjs '<case>'`,
    load: `${opts.connections} keep-alive connection${opts.connections === 1 ? '' : 's'}, GET ${opts.deny ? '/deny (all but the first denied)' : '/'}, from the benchmark process (not counted)`,
    warmRequests: opts.warm,
    countedRequests: opts.requests,
    perRequest: '(total instructions answering warm + counted) − (total answering warm), / counted',
    counts: "the server process's user space only (no kernel time)",
  }
  const file = writeResults(
    `http-instructions-${opts.deny ? 'deny-' : ''}${meta.date}`,
    { benchmark: 'http-instructions', ...meta, method, results },
    `# HTTP adapters: instructions per request — ${meta.date}

- Command: \`${meta.command}\`${meta.npmScript ? ` (runs \`${meta.npmScript}\`)` : ''}
- Node ${meta.node} (V8 ${meta.v8}), ${meta.platform}; ${valgrind}
- edgelimit ${meta.versions.edgelimit} at ${meta.git.head ?? 'unknown commit'}; build hash ${meta.edgelimitBuild}; express ${meta.versions.express}, fastify ${meta.versions.fastify}, hono ${meta.versions.hono}, @hono/node-server ${meta.versions['@hono/node-server']}
- ${meta.durationSeconds} s in all

${out.md}

Each server of \`bench:http\` (scenario \`${scenario}\`; load: ${method.load}) ran under \`${method.command}\` twice: answering ${opts.warm} requests, and ${opts.warm + opts.requests}; the difference of the two instruction totals, divided by ${opts.requests}, is one request at steady state. The counts repeat within about 1 % from run to run whatever the machine's load. They cover the server's user space only, not the kernel's socket work, which \`bench:http\`'s requests per second include: \`without / with\` here is the throughput ratio if user-space instructions were all a request cost, and it sits below bench:http's ratio by the kernel's share. The control rows set the two draft-10 fields by hand where the adapter runs (see bench:http).
`,
  )
  console.log(`\nwrote ${path.relative(process.cwd(), file)}.json and .md`)
}

await main(process.argv.slice(2))
