// Load generators for bench/http.mjs: wrk (preferred: C, one thread, leaves the other core to the
// server) or autocannon (programmatic, in the benchmark's own process) when wrk is not installed.

import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** The wrk binary's version line, or null when wrk is not on PATH. */
export function wrkVersion() {
  try {
    execFileSync('wrk', ['--version'], { stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (error) {
    // wrk prints its version with the usage text and exits 1.
    const out = `${error.stdout ?? ''}${error.stderr ?? ''}`
    const line = out.split('\n').find((l) => l.startsWith('wrk '))
    if (line !== undefined) return line.trim()
  }
  return null
}

// Alternates `/` and `/deny` per connection thread (wrk -t1: one thread, one counter).
const ALTERNATE_LUA = `local i = 0
request = function()
  i = i + 1
  if i % 2 == 0 then return wrk.format(nil, "/deny") end
  return wrk.format(nil, "/")
end
`
let luaFile

function seconds(value, unit) {
  return Number(value) * ({ us: 1e-6, ms: 1e-3, s: 1, m: 60 }[unit] ?? 1)
}

/**
 * Runs wrk for `duration` s with `connections` connections on one thread. Returns
 * { requests, seconds, rps, non2xx, errors, latencyP50Ms, latencyP99Ms }.
 */
export async function wrk({ url, connections, duration, alternate, cpu }) {
  const args = ['-t1', `-c${connections}`, `-d${duration}s`, '--latency']
  if (alternate) {
    luaFile ??= path.join(mkdtempSync(path.join(os.tmpdir(), 'edgelimit-wrk-')), 'alternate.lua')
    writeFileSync(luaFile, ALTERNATE_LUA)
    args.push('-s', luaFile)
  }
  // `cpu`: run wrk on that CPU only (taskset), away from the server's.
  const command =
    cpu === undefined ? ['wrk', [...args, url]] : ['taskset', ['-c', String(cpu), 'wrk', ...args, url]]
  const { stdout } = await run(command[0], command[1], { maxBuffer: 1 << 20 })
  const total = /(\d+) requests in ([\d.]+)(us|ms|s|m)/.exec(stdout)
  if (total === null) throw new Error(`unexpected wrk output:\n${stdout}`)
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout)
  const latency = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)`, 'm').exec(stdout)
    return m === null ? null : seconds(m[1], m[2]) * 1000
  }
  const requests = Number(total[1])
  const elapsed = seconds(total[2], total[3])
  return {
    requests,
    seconds: elapsed,
    rps: requests / elapsed,
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
    errors: errors === null ? 0 : errors.slice(1).reduce((a, b) => a + Number(b), 0),
    latencyP50Ms: latency(50),
    latencyP99Ms: latency(99),
  }
}

/** The same measurement with autocannon (programmatic). */
export async function autocannon({ url, connections, duration, alternate }) {
  const { default: cannon } = await import('autocannon')
  const result = await cannon({
    url,
    connections,
    duration,
    ...(alternate ? { requests: [{ path: '/' }, { path: '/deny' }] } : {}),
  })
  return {
    requests: result.requests.total,
    seconds: result.duration,
    rps: result.requests.total / result.duration,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
  }
}
