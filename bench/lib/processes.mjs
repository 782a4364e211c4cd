// Processes and temporary directories a benchmark owns, stopped by PID (never by name): on exit,
// on error and on SIGINT/SIGTERM/SIGHUP. Shared by bench/approximate.mjs and bench/redis.mjs.

import { rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'

/** Every byte of benchmark traffic goes to this address, on a port picked at start-up. */
export const HOST = '127.0.0.1'

/** PID → name of every process this script started and must stop. */
export const owned = new Map()
/** Temporary directories removed with the owned processes. */
export const tempDirs = new Set()

/** SIGKILLs every owned process and removes every temporary directory, synchronously. */
export function killOwnedSync() {
  for (const [pid, name] of owned) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
    owned.delete(pid)
    if (name === 'redis-server') process.stderr.write(`killed redis-server (pid ${pid})\n`)
  }
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
  tempDirs.clear()
}

/** Stops the owned processes when this one exits or is told to stop by a signal. */
export function installCleanup() {
  process.on('exit', killOwnedSync)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(signal, () => {
      process.stderr.write(`\n${signal}: stopping\n`)
      killOwnedSync()
      process.exit(128 + (os.constants.signals[signal] ?? 1))
    })
  }
}

/** A TCP port free on HOST right now (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, HOST, () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** PING over a fresh connection: true when the server answers +PONG. */
export function ping(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port })
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => done(chunk.toString().startsWith('+PONG')))
    socket.on('error', () => done(false))
  })
}
