/**
 * TEST FIXTURE: a local stand-in for Upstash's hosted Redis REST service, backed by a real Redis.
 *
 * There is no Upstash server to install from npm - Upstash runs the REST endpoint as a hosted service. This
 * bridge speaks the subset of its wire protocol that `@upstash/redis` uses for plain commands, pipelines and
 * transactions, so tests can drive `new Redis({ url, token })` from @upstash/redis against a real Redis on
 * 127.0.0.1. Production code talks to the real Upstash endpoint. See ./README.md for the exact subset.
 */
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type net from 'node:net'
import { Command, Redis, ReplyError } from 'ioredis'

export interface UpstashBridge {
  /** `http://127.0.0.1:<port>` - pass as `url` to `new Redis({ url, token })` from @upstash/redis. */
  readonly url: string
  /** Bearer token the bridge requires (random per bridge). */
  readonly token: string
  /** Close the HTTP server (and its keep-alive connections) and the Redis connection. */
  close(): Promise<void>
}

/** One request as the bridge received it: its path (`/`, `/pipeline`, …) and its parsed JSON body. */
export interface BridgeRequest {
  readonly path: string
  readonly body: unknown
}

/**
 * What the bridge does with a request instead of answering it normally: `'hang'` runs nothing and
 * never answers; `'reset'` runs the commands, then resets the connection (the client sees a network
 * error after the work was done); `{ status, body }` runs the commands, then answers `status` with
 * `body` as it is (a proxy's 504, a reply that is not what Redis sent).
 */
export type BridgeFault = 'hang' | 'reset' | { readonly status: number; readonly body: string }

export interface UpstashBridgeOptions {
  /** Called for every authorized request; a fault it returns replaces the normal answer. */
  fault?: (request: BridgeRequest) => BridgeFault | undefined
}

type Arg = string | number | boolean
type WireCommand = [string, ...Arg[]]
type Entry = { result: unknown } | { error: string }

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

const OK = Buffer.from('OK')

/**
 * A command whose reply reaches us untouched: raw Buffers (no reply encoding) and none of ioredis's
 * per-command reply transformers (which would e.g. turn an HGETALL reply into an object).
 */
class RawCommand extends Command {
  constructor(command: WireCommand) {
    super(
      command[0],
      command.slice(1).map((arg) => String(arg)),
      { replyEncoding: null },
    )
  }
  override transformReply(result: Buffer | Buffer[]): Buffer | Buffer[] {
    return result
  }
}

/**
 * Redis reply -> JSON. Integers stay numbers, nil -> null, arrays recurse, bulk/status strings become
 * strings: base64 when the request had `Upstash-Encoding: base64`, except that a top-level `OK` is sent
 * as-is (the client's decoder special-cases exactly that). Errors nested in arrays (e.g. from a Lua
 * `redis.pcall`) become their message string.
 */
function toJson(value: unknown, base64: boolean, topLevel: boolean): unknown {
  if (value === null || value === undefined) return null
  if (typeof value === 'number') return value
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'boolean') return value ? 1 : 0
  if (Buffer.isBuffer(value)) {
    if (!base64) return value.toString('utf8')
    return topLevel && value.equals(OK) ? 'OK' : value.toString('base64')
  }
  if (typeof value === 'string') return toJson(Buffer.from(value), base64, topLevel)
  if (Array.isArray(value)) return value.map((item) => toJson(item, base64, false))
  if (value instanceof Error) return toJson(Buffer.from(value.message), base64, false)
  return value
}

/** Pipelines have `sendCommand` at runtime; ioredis only types the chainable command methods. */
function queue(pipeline: unknown, command: Command): void {
  ;(pipeline as { sendCommand(command: Command): unknown }).sendCommand(command)
}

function parseCommand(value: unknown): WireCommand {
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    typeof value[0] !== 'string' ||
    !value.every((arg) => ['string', 'number', 'boolean'].includes(typeof arg))
  ) {
    throw new HttpError(400, 'ERR failed to parse command')
  }
  return value as WireCommand
}

function parseCommands(value: unknown): WireCommand[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new HttpError(400, 'ERR failed to parse pipeline request')
  return value.map(parseCommand)
}

function entry(error: Error | null, result: unknown, base64: boolean): Entry {
  return error ? { error: error.message } : { result: toJson(result, base64, true) }
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

/** Start the bridge on a free 127.0.0.1 port, forwarding to the Redis at `redis`. */
export async function startUpstashBridge(
  redis: { host: string; port: number },
  options: UpstashBridgeOptions = {},
): Promise<UpstashBridge> {
  const token = randomBytes(16).toString('hex')
  // RESP2 like Upstash (ioredis 6 defaults to RESP3, which changes e.g. Lua boolean replies).
  const backend = new Redis({ host: redis.host, port: redis.port, protocol: 2 })
  backend.on('error', () => {
    // connection errors surface as failed commands; keep ioredis from logging "Unhandled error event"
  })

  const parse = async (req: http.IncomingMessage): Promise<BridgeRequest> => {
    if (req.headers.authorization !== `Bearer ${token}`) throw new HttpError(401, 'Unauthorized')
    if (req.method !== 'POST') throw new HttpError(405, 'ERR only POST with a JSON body is supported')
    const path = new URL(req.url ?? '/', 'http://bridge').pathname
    try {
      return { path, body: JSON.parse(await readBody(req)) }
    } catch {
      throw new HttpError(400, 'ERR failed to parse request body as JSON')
    }
  }

  const handle = async (
    req: http.IncomingMessage,
    { path, body }: BridgeRequest,
  ): Promise<{ status: number; body: unknown }> => {
    const base64 = String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64'

    if (path === '/') {
      const command = parseCommand(body)
      try {
        const raw = new RawCommand(command)
        backend.sendCommand(raw)
        const result = await raw.promise
        return { status: 200, body: { result: toJson(result, base64, true) } }
      } catch (error) {
        throw new HttpError(error instanceof ReplyError ? 400 : 500, (error as Error).message)
      }
    }
    if (path === '/pipeline') {
      const pipeline = backend.pipeline()
      for (const command of parseCommands(body)) queue(pipeline, new RawCommand(command))
      const results = (await pipeline.exec()) ?? []
      return { status: 200, body: results.map(([error, result]) => entry(error, result, base64)) }
    }
    if (path === '/multi-exec') {
      const multi = backend.multi()
      for (const command of parseCommands(body)) queue(multi, new RawCommand(command))
      let results: [Error | null, unknown][] | null
      try {
        results = await multi.exec()
      } catch (error) {
        // e.g. EXECABORT after a command was rejected while queueing
        throw new HttpError(error instanceof ReplyError ? 400 : 500, (error as Error).message)
      }
      if (!results) throw new HttpError(400, 'EXECABORT transaction aborted')
      return { status: 200, body: results.map(([error, result]) => entry(error, result, base64)) }
    }
    throw new HttpError(404, `ERR unsupported path ${path} (the bridge implements /, /pipeline, /multi-exec)`)
  }

  const server = http.createServer((req, res) => {
    let fault: BridgeFault | undefined
    parse(req)
      .then((request) => {
        fault = options.fault?.(request)
        return fault === 'hang' ? new Promise<never>(() => {}) : handle(req, request)
      })
      .catch((error: unknown) => ({
        status: error instanceof HttpError ? error.status : 500,
        body: { error: (error as Error).message },
      }))
      .then(({ status, body }) => {
        if (fault === 'reset') return req.socket.destroy()
        const replaced = typeof fault === 'object' ? fault : undefined
        res.writeHead(replaced?.status ?? status, { 'content-type': 'application/json' })
        res.end(replaced === undefined ? JSON.stringify(body) : replaced.body)
      })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as net.AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    token,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
      backend.disconnect()
    },
  }
}
