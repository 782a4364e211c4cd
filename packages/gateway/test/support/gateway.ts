/**
 * Gateways for tests: in-process (`startInProcess`, the src modules) or as a real `edgelimit`
 * process (`spawnGateway`, the CLI bundled from src with esbuild, the library taken from its
 * source too, so a concurrent library build cannot break a run). Every server listens on
 * 127.0.0.1, on a port the OS picks.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { pino } from 'pino'
import { type Gateway, type GatewayOptions, startGateway } from '../../src/server/gateway.js'

const HERE = dirname(fileURLToPath(import.meta.url))
export const GATEWAY_ROOT = resolve(HERE, '../..')
export const REPO_ROOT = resolve(GATEWAY_ROOT, '../..')
const LIBRARY_SRC = resolve(REPO_ROOT, 'packages/edgelimit/src')

/** A log line as pino writes it. */
export type LogLine = Record<string, unknown> & { msg: string; level: number }

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'edgelimit-gateway-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

export function writePolicy(dir: string, text: string, name = 'edgelimit.yaml'): string {
  const file = join(dir, name)
  writeFileSync(file, text)
  return file
}

export interface InProcess {
  readonly gateway: Gateway
  readonly url: string
  readonly admin: string
  readonly file: string
  readonly logs: LogLine[]
  close(): Promise<void>
}

/** Starts a gateway in this process on a policy text; logs are collected, the file is not watched by default. */
export async function startInProcess(
  policy: string,
  options: Partial<Omit<GatewayOptions, 'logger' | 'config'>> = {},
): Promise<InProcess> {
  const file = writePolicy(tempDir(), policy)
  const logs: LogLine[] = []
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) },
  )
  const gateway = await startGateway({
    config: file,
    port: 0,
    adminPort: 0,
    watch: false,
    logger,
    ...options,
  })
  return {
    gateway,
    url: `http://127.0.0.1:${gateway.port}`,
    admin: `http://127.0.0.1:${gateway.adminPort}`,
    file,
    logs,
    close: () => gateway.close(),
  }
}

let bundled: Promise<string> | undefined
const cleanups: (() => void)[] = []
process.on('exit', () => {
  for (const cleanup of cleanups.splice(0)) {
    try {
      cleanup()
    } catch {}
  }
})

/** The `edgelimit` CLI bundled from the current source (once per test process). */
export function cliPath(): Promise<string> {
  bundled ??= (async () => {
    const dir = join(GATEWAY_ROOT, 'node_modules', '.cache', 'edgelimit-gateway-test')
    mkdirSync(dir, { recursive: true })
    const outfile = join(dir, `cli-${process.pid}.mjs`)
    await build({
      entryPoints: [join(GATEWAY_ROOT, 'src/cli.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile,
      packages: 'external',
      loader: { '.lua': 'text' },
      logLevel: 'error',
      plugins: [
        {
          name: 'edgelimit-from-source',
          setup(b) {
            b.onResolve({ filter: /^edgelimit(\/.*)?$/ }, (args) => ({
              path: join(LIBRARY_SRC, args.path === 'edgelimit' ? 'index.ts' : `${args.path.slice(10)}.ts`),
            }))
          },
        },
      ],
    })
    cleanups.push(() => rmSync(outfile, { force: true }))
    return outfile
  })()
  return bundled
}

export interface Spawned {
  readonly child: ChildProcess
  readonly port: number
  readonly adminPort: number
  readonly url: string
  readonly admin: string
  readonly logs: LogLine[]
  stderr(): string
  /** Resolves with the first log line (already written or still to come) that satisfies `test`. */
  waitForLog(test: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>
  readonly exited: Promise<number | null>
  /** Sends `signal` (SIGTERM by default) and resolves the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

const children = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})

/** Runs `edgelimit <args>` and waits for its "listening" line (port 0 and admin port 0 unless given). */
export async function spawnGateway(
  args: readonly string[],
  options: {
    env?: Record<string, string>
    cwd?: string
    /** Called with the process as soon as it is spawned (before it listens). */
    onSpawn?: (child: ChildProcess) => void
  } = {},
): Promise<Spawned> {
  const cli = await cliPath()
  const full = ['serve', ...args]
  if (!args.includes('--port')) full.push('--port', '0')
  if (!args.includes('--admin-port')) full.push('--admin-port', '0')
  const child = spawn(process.execPath, [cli, ...full], {
    cwd: options.cwd ?? REPO_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.add(child)
  options.onSpawn?.(child)
  const logs: LogLine[] = []
  const waiters = new Set<{ test: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>()
  let errText = ''
  let partial = ''
  child.stdout?.setEncoding('utf8')
  child.stdout?.on('data', (chunk: string) => {
    partial += chunk
    const lines = partial.split('\n')
    partial = lines.pop() ?? ''
    for (const text of lines) {
      if (text.trim() === '') continue
      const line = JSON.parse(text) as LogLine
      logs.push(line)
      for (const w of waiters) {
        if (w.test(line)) {
          waiters.delete(w)
          w.resolve(line)
        }
      }
    }
  })
  child.stderr?.setEncoding('utf8')
  child.stderr?.on('data', (chunk: string) => {
    errText += chunk
  })
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      children.delete(child)
      r(code)
    }),
  )
  const waitForLog = (test: (l: LogLine) => boolean, timeoutMs = 10_000) =>
    new Promise<LogLine>((resolve, reject) => {
      const hit = logs.find(test)
      if (hit !== undefined) return resolve(hit)
      const waiter = {
        test,
        resolve: (l: LogLine) => {
          clearTimeout(timer)
          resolve(l)
        },
      }
      const timer = setTimeout(() => {
        waiters.delete(waiter)
        reject(
          new Error(
            `no matching log line within ${timeoutMs} ms; stderr:\n${errText}\nlogs:\n${logs.map((l) => JSON.stringify(l)).join('\n')}`,
          ),
        )
      }, timeoutMs)
      waiters.add(waiter)
      void exited.then(() => {
        if (waiters.delete(waiter)) {
          clearTimeout(timer)
          reject(new Error(`edgelimit exited before the log line; stderr:\n${errText}`))
        }
      })
    })
  const listening = await waitForLog((l) => l.msg === 'listening', 15_000)
  const port = listening.port as number
  const adminPort = listening.adminPort as number
  return {
    child,
    port,
    adminPort,
    url: `http://127.0.0.1:${port}`,
    admin: `http://127.0.0.1:${adminPort}`,
    logs,
    stderr: () => errText,
    waitForLog,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}

/**
 * Runs `edgelimit <args>` to completion; after `timeoutMs` it is killed and the code is `null`.
 * `stdout`: a file descriptor to write to instead of a pipe, or `closed` (a pipe whose reader has
 * gone, as `| head -1` leaves it).
 */
export async function runCli(
  args: readonly string[],
  options: {
    timeoutMs?: number
    stdin?: string
    stdout?: number | 'closed'
    stderr?: number | 'closed'
    /** The working directory (default: the repository's root). */
    cwd?: string
  } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cli = await cliPath()
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      stdio: [
        options.stdin === undefined ? 'ignore' : 'pipe',
        typeof options.stdout === 'number' ? options.stdout : 'pipe',
        typeof options.stderr === 'number' ? options.stderr : 'pipe',
      ],
    })
    children.add(child)
    if (options.stdin !== undefined) child.stdin?.end(options.stdin)
    if (options.stdout === 'closed') child.stdout?.destroy()
    if (options.stderr === 'closed') child.stderr?.destroy()
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000)
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', (c) => {
      stdout += c
    })
    child.stderr?.on('data', (c) => {
      stderr += c
    })
    child.on('exit', (code) => {
      clearTimeout(timer)
      children.delete(child)
      resolve({ code, stdout, stderr })
    })
  })
}

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  body: Buffer
}

/** One request with node:http (raw header lines visible), on a fresh connection. */
export function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string> | string[]; body?: string | Buffer } = {},
): Promise<RawResponse> {
  // Header lines given as a flat list get no automatic Host line.
  const headers = Array.isArray(options.headers)
    ? ['Host', new URL(url).host, ...options.headers]
    : options.headers
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(chunks),
        }),
      )
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(options.body)
  })
}

/** Fires `count` requests with at most `concurrency` in flight; resolves their statuses in order. */
export async function burst(
  count: number,
  concurrency: number,
  send: (i: number) => Promise<number>,
): Promise<number[]> {
  const statuses: number[] = new Array(count)
  let next = 0
  const worker = async () => {
    while (next < count) {
      const i = next++
      statuses[i] = await send(i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  return statuses
}

export const count = (statuses: readonly number[], status: number) =>
  statuses.filter((s) => s === status).length

/** What a raw client connection has received, as `socketReader` collects it. */
export interface SocketReader {
  readonly socket: Socket
  /** Everything received so far (latin1). */
  readonly text: string
  readonly closed: boolean
  /** When the connection closed, in ms since the reader started; `undefined` while open. */
  readonly closedAfter: number | undefined
  /** Resolves with the text so far once it satisfies `done`, or once the connection closed. */
  until(done?: (text: string) => boolean): Promise<string>
}

/** Collects what arrives on a raw connection (the gateway's answers, byte for byte). */
export function socketReader(socket: Socket): SocketReader {
  const started = performance.now()
  let text = ''
  let closedAfter: number | undefined
  const waiting = new Set<() => void>()
  const wake = () => {
    for (const w of waiting) w()
  }
  socket.on('data', (data: Buffer) => {
    text += data.toString('latin1')
    wake()
  })
  socket.on('close', () => {
    closedAfter = performance.now() - started
    wake()
  })
  socket.on('error', () => {})
  return {
    socket,
    get text() {
      return text
    },
    get closed() {
      return closedAfter !== undefined
    },
    get closedAfter() {
      return closedAfter
    },
    until(done = () => false) {
      return new Promise((resolve) => {
        const check = () => {
          if (!done(text) && closedAfter === undefined) return
          waiting.delete(check)
          resolve(text)
        }
        waiting.add(check)
        check()
      })
    },
  }
}
