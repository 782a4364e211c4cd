// Profiles one bench/http server under load and prints its cost centres.
//
//   npm run build && node bench/http/profile.mjs [adapter=node] [--without] [--duration <s>] [--dist <dir>]
//
// Runs bench/http/server.mjs with `--cpu-prof` (limited, scenario admit, unless --without), loads
// it with wrk (or autocannon), and prints the functions with the most self time and the edgelimit
// functions with the most inclusive time (self + callees). The .cpuprofile is kept for DevTools.

import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { autocannon, wrk, wrkVersion } from './load.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const argv = process.argv.slice(2)
const adapter =
  argv.find((a, i) => !a.startsWith('--') && Number.isNaN(Number(a)) && argv[i - 1] !== '--dist') ?? 'node'
const duration = argv.includes('--duration') ? Number(argv[argv.indexOf('--duration') + 1]) : 8
const limited = !argv.includes('--without')
const dist = argv.includes('--dist')
  ? path.resolve(argv[argv.indexOf('--dist') + 1])
  : path.dirname(fileURLToPath(import.meta.resolve('edgelimit')))
const dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-prof-'))

const child = spawn(
  process.execPath,
  [
    '--cpu-prof',
    '--cpu-prof-dir',
    dir,
    path.join(ROOT, 'bench', 'http', 'server.mjs'),
    JSON.stringify({ adapter, limited, scenario: 'admit', dist }),
  ],
  { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] },
)
const exited = new Promise((resolve) => child.once('exit', resolve))
const first = await new Promise((resolve) =>
  createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line))),
)
const load = wrkVersion() === null ? autocannon : wrk
const result = await load({
  url: `http://127.0.0.1:${first.port}/`,
  connections: 50,
  duration,
  alternate: false,
})
child.stdin.end()
await exited

const file = path.join(
  dir,
  readdirSync(dir).find((f) => f.endsWith('.cpuprofile')),
)
const profile = JSON.parse(readFileSync(file, 'utf8'))
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const interval = (profile.endTime - profile.startTime) / profile.samples.length / 1000 // ms per sample
const name = (n) => {
  const f = n.callFrame
  const where = f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : ''
  return `${f.functionName || '(anonymous)'} ${where}`.trim()
}
const self = new Map()
const inclusive = new Map()
const total = profile.samples.length
function walk(node, stack) {
  const key = name(node)
  self.set(key, (self.get(key) ?? 0) + node.hitCount)
  let sum = node.hitCount
  const seen = new Set(stack)
  for (const id of node.children ?? []) sum += walk(byId.get(id), [...stack, key])
  // Count each function once per path, so recursion does not double it.
  if (!seen.has(key)) inclusive.set(key, (inclusive.get(key) ?? 0) + sum)
  return sum
}
walk(byId.get(profile.nodes[0].id), [])

const top = (map, filter, n) =>
  [...map.entries()]
    .filter(([k]) => filter(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([k, v]) =>
        `${((100 * v) / total).toFixed(1).padStart(5)}%  ${(v * interval).toFixed(0).padStart(6)} ms  ${k}`,
    )
    .join('\n')

const idle = (k) => !/^\((idle|program|garbage collector)\)/.test(k)
console.log(
  `${adapter} ${limited ? 'with' : 'without'} the adapter: ${Math.round(result.rps)} req/s; profile ${file}\n`,
)
console.log(
  `(idle) ${((100 * (self.get('(idle)') ?? 0)) / total).toFixed(1)}%, (garbage collector) ${((100 * (self.get('(garbage collector)') ?? 0)) / total).toFixed(1)}%, (program) ${((100 * (self.get('(program)') ?? 0)) / total).toFixed(1)}%\n`,
)
console.log(`Self time, top 25:\n${top(self, idle, 25)}\n`)
console.log(
  `Inclusive time, edgelimit (dist) functions, top 20:\n${top(inclusive, (k) => /chunk-|node\.js|express\.js|fastify\.js|hono\.js|fetch\.js/.test(k) && idle(k), 20)}`,
)
