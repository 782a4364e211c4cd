// A redis-server of the benchmark's own, on a free HOST port with persistence off, owned by PID
// (bench/lib/processes.mjs). Shared by bench/approximate.mjs and bench/redis.mjs.

import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { freePort, HOST, owned, ping, tempDirs } from './processes.mjs'

/**
 * Starts redis-server with its files in `dir`; without `dir`, in a new temporary directory that
 * `stop()` removes. Retries on another port when the picked one was taken meanwhile.
 * Returns `{ port, pid, args, stop() }`.
 */
export async function startRedis(dir) {
  const own = dir === undefined
  if (own) {
    dir = mkdtempSync(path.join(os.tmpdir(), 'edgelimit-bench-redis-'))
    tempDirs.add(dir)
  }
  const log = path.join(dir, 'redis.log')
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no']
    args.push('--dir', dir, '--logfile', log, '--daemonize', 'no', '--protected-mode', 'yes')
    const child = spawn('redis-server', args, { stdio: 'ignore' })
    child.on('error', () => {})
    if (child.pid === undefined) throw new Error('could not spawn redis-server (is it on PATH?)')
    owned.set(child.pid, 'redis-server')
    const exited = new Promise((resolve) => child.once('exit', resolve))
    let alive = true
    exited.then(() => {
      alive = false
      owned.delete(child.pid)
    })
    const deadline = Date.now() + 10_000
    while (alive && Date.now() < deadline && !(await ping(port))) {
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    if (alive && (await ping(port))) {
      return {
        port,
        pid: child.pid,
        args,
        async stop() {
          if (alive) process.kill(child.pid, 'SIGTERM')
          const timer = setTimeout(() => alive && process.kill(child.pid, 'SIGKILL'), 5000)
          await exited
          clearTimeout(timer)
          if (own) {
            rmSync(dir, { recursive: true, force: true })
            tempDirs.delete(dir)
          }
        },
      }
    }
    if (alive) process.kill(child.pid, 'SIGKILL')
    await exited
    const tail = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').slice(-5).join('\n') : ''
    if (attempt >= 5 || !/Address already in use/i.test(tail)) {
      throw new Error(`redis-server did not start on ${HOST}:${port}:\n${tail}`)
    }
  }
}

/** The command line as the reports print it (empty arguments as ""). */
export function redisCommand(args) {
  return ['redis-server', ...args.map((a) => (a === '' ? '""' : a))].join(' ')
}
