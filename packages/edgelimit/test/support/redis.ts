/**
 * Test fixtures that run REAL Redis servers (standalone and cluster) started by the test process itself.
 *
 * - Every server listens on 127.0.0.1 only, on a free port picked at start-up, with persistence disabled and
 *   its own temporary directory (removed again on stop).
 * - Every spawned PID is recorded. `stop()` sends SIGTERM, escalates to SIGKILL after a timeout and waits for
 *   the exit. On process 'exit' / SIGINT / SIGTERM / SIGHUP any child still running is SIGKILLed, and a tiny
 *   detached reaper (`sh`) watching a pipe from this process kills whatever is left even if this process dies
 *   from SIGKILL - so no redis-server outlives the test process.
 * - Start-up always times out with an error that includes the tail of the server log.
 *
 * See ./README.md.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const HOST = '127.0.0.1' as const

export interface RedisServer {
  readonly host: typeof HOST
  readonly port: number
  /** `redis://127.0.0.1:<port>` */
  readonly url: string
  /** PID of the current redis-server process (changes after `restart()`). */
  readonly pid: number
  /** Temporary working directory of the server (holds `redis.log`); removed by `stop()`. */
  readonly dir: string
  /** SIGTERM, then SIGKILL after a timeout; waits for the exit and removes the temp dir. Idempotent. */
  stop(): Promise<void>
  /** Kill the server and start a new one on the same port. Data is gone (persistence is disabled). */
  restart(): Promise<void>
  /** SIGSTOP: the server keeps its sockets but answers nothing until `resume()`. */
  pause(): void
  /** SIGCONT */
  resume(): void
}

export interface StartRedisOptions {
  /** Extra `redis-server` arguments, appended after the defaults, e.g. `['--maxmemory', '10mb']`. */
  args?: string[]
  /** Give up (and kill the server) when PING has not answered after this long. Default 10 000 ms. */
  startupTimeoutMs?: number
}

export interface ClusterNodeAddress {
  host: typeof HOST
  port: number
}

export interface RedisCluster {
  /** All 6 nodes (3 masters + 3 replicas at start), including nodes killed later. */
  readonly nodes: ClusterNodeAddress[]
  /** Running nodes that currently serve slots as masters, as seen by a running node. Sorted by port. */
  masters(): Promise<{ host: typeof HOST; port: number; pid: number }[]>
  /** Stop every node (SIGTERM, then SIGKILL) and remove the temp dir. Idempotent. */
  stop(): Promise<void>
  /** SIGKILL one node and wait until it has exited. */
  killNode(port: number): Promise<void>
  /**
   * Wait until every running node reports cluster_state:ok and agrees that exactly 3 running, reachable
   * nodes own all slots as masters. Times out (default 30 s) with an error.
   */
  waitForFailover(timeoutMs?: number): Promise<void>
}

export interface StartClusterOptions {
  /** Timeout for each start-up phase (processes, `redis-cli --cluster create`, convergence). Default 30 000 ms. */
  startupTimeoutMs?: number
}

export interface DelayProxy {
  /** Port on 127.0.0.1 to connect to instead of the target. */
  readonly port: number
  /** Stop listening and destroy every proxied connection. */
  close(): Promise<void>
}

// ---------------------------------------------------------------------------------------------------------
// Child process registry and cleanup
// ---------------------------------------------------------------------------------------------------------

const children = new Map<number, ChildProcess>()
const tempDirs = new Set<string>()
let cleanupInstalled = false
let reaper: { dir: string } | undefined

/** Keep the reaper's lists (`pids`, `dirs`) in sync with what is alive. */
function writeReaperFiles(): void {
  if (!reaper) return
  try {
    writeFileSync(join(reaper.dir, 'pids'), [...children.keys()].map((pid) => `${pid}\n`).join(''))
    writeFileSync(join(reaper.dir, 'dirs'), [...tempDirs].map((dir) => `${dir}\n`).join(''))
  } catch {
    // the reaper is a second line of defence only
  }
}

function killAllSync(): void {
  for (const [pid, child] of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
  }
  children.clear()
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
  tempDirs.clear()
  writeReaperFiles()
}

function installCleanup(): void {
  if (cleanupInstalled) return
  cleanupInstalled = true
  process.on('exit', killAllSync)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killAllSync()
      // Keep the default behaviour (terminate) unless someone else handles the signal.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    }
    process.once(signal, onSignal)
  }
  startReaper()
}

/**
 * A detached `sh` whose stdin is a pipe from this process. When this process dies - however it dies, even
 * by SIGKILL - the pipe closes, `cat` returns, and the shell SIGKILLs every PID still listed in `pids` and
 * removes every directory listed in `dirs`. Detached, so a Ctrl-C to the process group does not kill it first.
 */
function startReaper(): void {
  try {
    const dir = mkdtempSync(join(tmpdir(), 'edgelimit-reaper-'))
    reaper = { dir }
    writeReaperFiles()
    const script = [
      'cat >/dev/null',
      'while read -r p; do kill -9 "$p" 2>/dev/null; done < "$0/pids"',
      'while IFS= read -r d; do [ -n "$d" ] && rm -rf "$d"; done < "$0/dirs"',
      'rm -rf "$0"',
    ].join('; ')
    const child = spawn('sh', ['-c', script, dir], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] })
    child.on('error', () => {})
    child.stdin?.on('error', () => {})
    child.unref()
    // the pipe must not keep the event loop alive
    ;(child.stdin as unknown as net.Socket | null)?.unref?.()
  } catch {
    reaper = undefined
  }
}

function makeTempDir(prefix: string): string {
  installCleanup()
  const dir = mkdtempSync(join(tmpdir(), prefix))
  tempDirs.add(dir)
  writeReaperFiles()
  return dir
}

async function removeTempDir(dir: string): Promise<void> {
  tempDirs.delete(dir)
  writeReaperFiles()
  await rm(dir, { recursive: true, force: true })
}

// ---------------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------------

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error)
    server.once('error', onError)
    server.listen(port, HOST, () => {
      server.off('error', onError)
      resolve()
    })
  })
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()))
}

/**
 * Distinct free loopback ports: bind `count` servers to port 0 on 127.0.0.1 at the same time (so they are
 * distinct), read the ports, close them. Retries on EADDRINUSE. Another process may still grab a port before
 * redis-server binds it; the callers retry start-up in that case.
 */
export async function freePorts(count: number): Promise<number[]> {
  for (let attempt = 0; ; attempt++) {
    const servers: net.Server[] = []
    try {
      for (let i = 0; i < count; i++) {
        const server = net.createServer()
        servers.push(server)
        await listen(server, 0)
      }
      return servers.map((server) => (server.address() as net.AddressInfo).port)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 10) throw error
    } finally {
      await Promise.all(servers.map((server) => (server.listening ? closeServer(server) : undefined)))
    }
  }
}

function logTail(logFile: string, fromByte = 0, lines = 25): string {
  try {
    const text = readFileSync(logFile).subarray(fromByte).toString('utf8')
    const tail = text.trimEnd().split('\n').slice(-lines).join('\n')
    return tail.length > 0 ? tail : '(empty log)'
  } catch {
    return '(no log)'
  }
}

function fileSize(file: string): number {
  try {
    return statSync(file).size
  } catch {
    return 0
  }
}

// ---------------------------------------------------------------------------------------------------------
// Minimal RESP client (one connection per command), used for readiness and cluster state checks
// ---------------------------------------------------------------------------------------------------------

export type RespReply = string | number | null | Error | RespReply[]

function parseReply(buf: Buffer, offset: number): [RespReply, number] | undefined {
  const lineEnd = buf.indexOf('\r\n', offset)
  if (lineEnd < 0) return undefined
  const type = String.fromCharCode(buf[offset] ?? 0)
  const line = buf.toString('utf8', offset + 1, lineEnd)
  const next = lineEnd + 2
  switch (type) {
    case '+':
      return [line, next]
    case '-':
      return [new Error(line), next]
    case ':':
      return [Number(line), next]
    case '$': {
      const length = Number(line)
      if (length < 0) return [null, next]
      if (buf.length < next + length + 2) return undefined
      return [buf.toString('utf8', next, next + length), next + length + 2]
    }
    case '*': {
      const length = Number(line)
      if (length < 0) return [null, next]
      const items: RespReply[] = []
      let position = next
      for (let i = 0; i < length; i++) {
        const parsed = parseReply(buf, position)
        if (!parsed) return undefined
        items.push(parsed[0])
        position = parsed[1]
      }
      return [items, position]
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`)
  }
}

function encodeCommand(args: string[]): string {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`
}

/** Send one command on a fresh connection; rejects on Redis error replies, socket errors and timeout. */
export function redisCommand(port: number, args: string[], timeoutMs = 1000): Promise<RespReply> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0)
    let settled = false
    const socket = net.connect({ host: HOST, port })
    const finish = (error: Error | undefined, value?: RespReply): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      if (error) reject(error)
      else resolve(value ?? null)
    }
    const timer = setTimeout(
      () => finish(new Error(`${args[0]} to ${HOST}:${port} timed out after ${timeoutMs} ms`)),
      timeoutMs,
    )
    socket.on('connect', () => socket.write(encodeCommand(args)))
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      try {
        const parsed = parseReply(buffer, 0)
        if (!parsed) return
        const [value] = parsed
        if (value instanceof Error) finish(value)
        else finish(undefined, value)
      } catch (error) {
        finish(error as Error)
      }
    })
    socket.on('error', (error) => finish(error))
    socket.on('close', () => finish(new Error(`connection to ${HOST}:${port} closed before a reply`)))
  })
}

function infoField(info: RespReply, field: string): string | undefined {
  if (typeof info !== 'string') return undefined
  const match = new RegExp(`^${field}:(.*)$`, 'm').exec(info)
  return match?.[1]?.trim()
}

// ---------------------------------------------------------------------------------------------------------
// redis-server processes
// ---------------------------------------------------------------------------------------------------------

class StartupError extends Error {
  constructor(
    message: string,
    readonly addressInUse: boolean,
  ) {
    super(message)
    this.name = 'RedisStartupError'
  }
}

class RedisProcess {
  readonly child: ChildProcess
  readonly pid: number
  readonly exited: Promise<void>
  readonly logStart: number

  constructor(
    args: string[],
    readonly port: number,
    readonly logFile: string,
  ) {
    this.logStart = fileSize(logFile)
    const fd = openSync(logFile, 'a')
    try {
      this.child = spawn('redis-server', args, { stdio: ['ignore', fd, fd] })
    } finally {
      closeSync(fd)
    }
    const pid = this.child.pid
    if (pid === undefined) {
      this.child.on('error', () => {})
      throw new Error('could not spawn redis-server (is it installed and on PATH?)')
    }
    this.pid = pid
    children.set(pid, this.child)
    writeReaperFiles()
    this.child.on('error', () => {})
    this.exited = new Promise((resolve) => {
      this.child.once('exit', () => {
        children.delete(pid)
        writeReaperFiles()
        resolve()
      })
    })
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  signal(signal: NodeJS.Signals): void {
    if (!this.running) return
    try {
      process.kill(this.pid, signal)
    } catch {
      // raced with the exit
    }
  }

  tail(): string {
    return logTail(this.logFile, this.logStart)
  }

  async waitForPing(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    let lastError = 'no answer yet'
    while (Date.now() < deadline) {
      if (!this.running) {
        await this.exited
        const tail = this.tail()
        throw new StartupError(
          `redis-server on ${HOST}:${this.port} exited during start-up ` +
            `(code ${this.child.exitCode}, signal ${this.child.signalCode}). Log tail (${this.logFile}):\n${tail}`,
          /Address already in use/i.test(tail),
        )
      }
      try {
        if ((await redisCommand(this.port, ['PING'], 500)) === 'PONG') return
      } catch (error) {
        lastError = (error as Error).message
      }
      await sleep(20)
    }
    await this.kill()
    throw new StartupError(
      `redis-server on ${HOST}:${this.port} did not answer PING within ${timeoutMs} ms (last: ${lastError}). ` +
        `Log tail (${this.logFile}):\n${this.tail()}`,
      false,
    )
  }

  /** SIGTERM (after SIGCONT in case it is paused), SIGKILL after `timeoutMs`, wait for the exit. */
  async stop(timeoutMs = 5000): Promise<void> {
    if (!this.running) return this.exited
    this.signal('SIGCONT')
    this.signal('SIGTERM')
    let timer: NodeJS.Timeout | undefined
    const timedOut = await Promise.race([
      this.exited.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs)
      }),
    ])
    clearTimeout(timer)
    if (timedOut) await this.kill()
  }

  async kill(): Promise<void> {
    this.signal('SIGKILL')
    await this.exited
  }
}

function baseArgs(port: number, dir: string): string[] {
  return ['--save', '', '--appendonly', 'no', '--bind', HOST, '--port', String(port), '--dir', dir]
}

/**
 * Spawn redis-server and wait for PING. `port` undefined: pick free ports and retry on EADDRINUSE;
 * fixed port: retry the same port a few times (it may still be held for a moment).
 */
async function spawnReady(
  makeArgs: (port: number) => string[],
  logFile: string,
  port: number | undefined,
  timeoutMs: number,
): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const [candidate] = port === undefined ? await freePorts(1) : [port]
    if (candidate === undefined) throw new Error('no free port')
    const proc = new RedisProcess(makeArgs(candidate), candidate, logFile)
    try {
      await proc.waitForPing(timeoutMs)
      return proc
    } catch (error) {
      await proc.kill()
      if (!(error instanceof StartupError) || !error.addressInUse || attempt >= 5) throw error
      if (port !== undefined) await sleep(100 * attempt)
    }
  }
}

/** Start a standalone redis-server on a free 127.0.0.1 port. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const extra = options.args ?? []
  const timeoutMs = options.startupTimeoutMs ?? 10_000
  const dir = makeTempDir('edgelimit-redis-')
  const logFile = join(dir, 'redis.log')
  const makeArgs = (port: number): string[] => [...baseArgs(port, dir), ...extra]

  let proc: RedisProcess
  try {
    proc = await spawnReady(makeArgs, logFile, undefined, timeoutMs)
  } catch (error) {
    await removeTempDir(dir)
    throw error
  }
  const port = proc.port
  let stopped = false

  return {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    dir,
    get pid() {
      return proc.pid
    },
    async stop() {
      if (stopped) return
      stopped = true
      await proc.stop()
      await removeTempDir(dir)
    },
    async restart() {
      if (stopped) throw new Error(`redis-server on port ${port} was stopped; cannot restart`)
      await proc.stop()
      proc = await spawnReady(makeArgs, logFile, port, timeoutMs)
    },
    pause() {
      if (stopped) throw new Error(`redis-server on port ${port} was stopped`)
      proc.signal('SIGSTOP')
    },
    resume() {
      proc.signal('SIGCONT')
    },
  }
}

// ---------------------------------------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------------------------------------

interface ClusterNode {
  index: number
  port: number
  busPort: number
  logFile: string
  proc: RedisProcess
}

interface NodeLine {
  id: string
  port: number
  flags: string[]
  masterId: string
  linkState: string
  slots: string[]
}

function parseClusterNodes(text: RespReply): NodeLine[] {
  if (typeof text !== 'string') throw new Error('CLUSTER NODES did not return a string')
  return text
    .trim()
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '', , , , linkState = '', ...slots] =
        line.split(' ')
      const port = Number(/:(\d+)@/.exec(address)?.[1] ?? Number.NaN)
      return { id, port, flags: flags.split(','), masterId, linkState, slots }
    })
}

const isFailing = (node: NodeLine): boolean => node.flags.some((flag) => flag.startsWith('fail'))
const servesSlots = (node: NodeLine): boolean =>
  node.flags.includes('master') && !isFailing(node) && node.slots.some((slot) => !slot.startsWith('['))

function runCommand(
  command: string,
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout?.on('data', (chunk) => {
      output += chunk
    })
    child.stderr?.on('data', (chunk) => {
      output += chunk
    })
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${command} ${args.join(' ')} timed out after ${timeoutMs} ms. Output:\n${output}`))
    }, timeoutMs)
    child.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}

/** ANSI colour codes in redis-cli output */
const ANSI = /\x1b\[[0-9;]*m/g

/**
 * Start a 6-node cluster (3 masters, 3 replicas) on free 127.0.0.1 ports. Each node gets an explicit
 * `--cluster-port` (bus port), so port+10000 does not need to be free.
 */
export async function startCluster(options: StartClusterOptions = {}): Promise<RedisCluster> {
  const timeoutMs = options.startupTimeoutMs ?? 30_000
  const dir = makeTempDir('edgelimit-cluster-')
  const nodes: ClusterNode[] = []

  const stopAll = async (): Promise<void> => {
    await Promise.all(nodes.map((node) => node.proc.stop()))
  }
  const logs = (): string =>
    nodes.map((node) => `--- node ${node.port} (${node.logFile}):\n${node.proc.tail()}`).join('\n')

  try {
    for (let attempt = 1; nodes.length === 0; attempt++) {
      const ports = await freePorts(12)
      const started = Array.from({ length: 6 }, (_, index) => {
        const port = ports[index] as number
        const busPort = ports[index + 6] as number
        const logFile = join(dir, `node-${index}.log`)
        const args = [
          ...baseArgs(port, dir),
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${index}.conf`),
          '--cluster-node-timeout',
          '1000',
          '--cluster-port',
          String(busPort),
          // do not wait for (already stopping) replicas on SIGTERM
          '--shutdown-timeout',
          '0',
          // start the initial full sync to a replica at once instead of after the default 5 s
          '--repl-diskless-sync-delay',
          '0',
        ]
        return { index, port, busPort, logFile, proc: new RedisProcess(args, port, logFile) }
      })
      const results = await Promise.allSettled(started.map((node) => node.proc.waitForPing(timeoutMs)))
      const failure = results.find((result) => result.status === 'rejected')
      if (!failure) {
        nodes.push(...started)
        break
      }
      await Promise.all(started.map((node) => node.proc.kill()))
      const reason = (failure as PromiseRejectedResult).reason
      if (!(reason instanceof StartupError) || !reason.addressInUse || attempt >= 5) throw reason
    }

    const create = await runCommand(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((node) => `${HOST}:${node.port}`),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ],
      timeoutMs,
    )
    if (create.code !== 0) {
      throw new Error(
        `redis-cli --cluster create failed (exit ${create.code}):\n${create.output.replace(ANSI, '')}\n${logs()}`,
      )
    }
    await waitUntil(timeoutMs, 'cluster to become ready', async () => checkCluster(nodes, 3), logs)
  } catch (error) {
    await stopAll()
    await removeTempDir(dir)
    throw error
  }

  let stopped = false
  const cluster: RedisCluster = {
    nodes: nodes.map((node) => ({ host: HOST, port: node.port })),
    async masters() {
      let lastError: unknown
      for (const node of nodes.filter((n) => n.proc.running)) {
        try {
          const view = parseClusterNodes(await redisCommand(node.port, ['CLUSTER', 'NODES']))
          return view
            .filter(servesSlots)
            .flatMap((line) => {
              const owner = nodes.find((n) => n.port === line.port)
              return owner?.proc.running ? [{ host: HOST, port: owner.port, pid: owner.proc.pid }] : []
            })
            .sort((a, b) => a.port - b.port)
        } catch (error) {
          lastError = error
        }
      }
      throw new Error(`no cluster node answered CLUSTER NODES: ${String(lastError)}`)
    },
    async stop() {
      if (stopped) return
      stopped = true
      await stopAll()
      await removeTempDir(dir)
    },
    async killNode(port) {
      const node = nodes.find((n) => n.port === port)
      if (!node) throw new Error(`no cluster node on port ${port}`)
      await node.proc.kill()
    },
    async waitForFailover(timeout = 30_000) {
      await waitUntil(timeout, 'cluster failover', async () => checkCluster(nodes, 0), logs)
    },
  }
  return cluster
}

/**
 * `undefined` when, on every running node: cluster_state is ok, the node's view has exactly 3 non-failing
 * masters owning slots and each of them is a running node that answers PING; and (`minReplicas` > 0) at
 * least that many replicas have `master_link_status:up`. Otherwise a description of what is missing.
 */
async function checkCluster(nodes: ClusterNode[], minReplicas: number): Promise<string | undefined> {
  const running = nodes.filter((node) => node.proc.running)
  let replicasUp = 0
  for (const node of running) {
    const info = await redisCommand(node.port, ['CLUSTER', 'INFO'])
    const state = infoField(info, 'cluster_state')
    if (state !== 'ok') return `node ${node.port}: cluster_state:${state}`
    const view = parseClusterNodes(await redisCommand(node.port, ['CLUSTER', 'NODES']))
    const masters = view.filter(servesSlots)
    if (masters.length !== 3) return `node ${node.port} sees ${masters.length} masters with slots`
    for (const master of masters) {
      const owner = running.find((n) => n.port === master.port)
      if (!owner) return `node ${node.port} still routes slots to stopped node ${master.port}`
    }
    const replication = await redisCommand(node.port, ['INFO', 'replication'])
    if (infoField(replication, 'role') === 'slave') {
      const link = infoField(replication, 'master_link_status')
      if (link !== 'up') return `replica ${node.port}: master_link_status:${link}`
      replicasUp++
    }
  }
  if (replicasUp < minReplicas) return `${replicasUp}/${minReplicas} replicas up`
  for (const node of running) {
    const view = parseClusterNodes(await redisCommand(node.port, ['CLUSTER', 'NODES']))
    const replicas = view.filter((line) => line.flags.includes('slave') && !isFailing(line))
    if (replicas.length < minReplicas) return `node ${node.port} sees ${replicas.length} replicas`
  }
  return undefined
}

async function waitUntil(
  timeoutMs: number,
  what: string,
  check: () => Promise<string | undefined>,
  logs: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = 'not checked yet'
  while (Date.now() < deadline) {
    try {
      const problem = await check()
      if (problem === undefined) return
      last = problem
    } catch (error) {
      last = (error as Error).message
    }
    await sleep(100)
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last state: ${last}\n${logs()}`)
}

// ---------------------------------------------------------------------------------------------------------
// Delay proxy
// ---------------------------------------------------------------------------------------------------------

/**
 * Forward `delayMs` later, in order: chunks are queued with a due time and flushed by a single timer, and an
 * end-of-stream is forwarded after the chunks before it.
 */
function delayedPipe(from: net.Socket, to: net.Socket, delayMs: number): void {
  const queue: { due: number; chunk: Buffer | null }[] = []
  let timer: NodeJS.Timeout | undefined
  const flush = (): void => {
    timer = undefined
    const now = Date.now()
    while (queue.length > 0 && (queue[0]?.due ?? 0) <= now) {
      const item = queue.shift()
      if (!item || to.destroyed) continue
      if (item.chunk === null) to.end()
      else to.write(item.chunk)
    }
    schedule()
  }
  const schedule = (): void => {
    const head = queue[0]
    if (timer === undefined && head) timer = setTimeout(flush, Math.max(0, head.due - Date.now()))
  }
  from.on('data', (chunk: Buffer) => {
    queue.push({ due: Date.now() + delayMs, chunk })
    schedule()
  })
  from.on('end', () => {
    queue.push({ due: Date.now() + delayMs, chunk: null })
    schedule()
  })
  from.on('close', () => {
    // on an abortive close, drop the connection on the other side too (after the delay)
    if (!from.readableEnded) setTimeout(() => to.destroy(), delayMs)
  })
  to.on('close', () => {
    clearTimeout(timer)
    queue.length = 0
  })
}

/** A TCP proxy on 127.0.0.1 that delays every chunk by `delayMs` in BOTH directions (RTT + 2×delayMs). */
export async function startDelayProxy(
  target: { host: string; port: number },
  delayMs: number,
): Promise<DelayProxy> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ host: target.host, port: target.port, allowHalfOpen: true })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {
        client.destroy()
        upstream.destroy()
      })
    }
    delayedPipe(client, upstream, delayMs)
    delayedPipe(upstream, client, delayMs)
  })
  await listen(server, 0)
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    async close() {
      const closed = closeServer(server)
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}
