import { closeSync, createReadStream, openSync, readSync, statSync } from 'node:fs'
import { Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import { UsageError } from '../report/io.js'

/** Called for each line `buf[s, e)` (without its line ending); `line` counts from 1 per input. */
export type LineHandler = (buf: Buffer, s: number, e: number, line: number) => void

/** Longest line kept; a longer one is reported (as `tooLong`) and skipped to its end. */
export const MAX_LINE_BYTES = 1 << 20

const NL = 0x0a
const CR = 0x0d

/** A byte source: a file path, `-` for standard input, or any readable stream of bytes. */
export type Input = string | NodeJS.ReadableStream

/**
 * Streams an input line by line in constant memory, gunzipping it when it starts with the gzip
 * magic bytes. `onBytes` reports raw (compressed) bytes read, for progress.
 */
export async function forEachLine(
  input: Input,
  onLine: LineHandler,
  onTooLong: (line: number) => void,
  onBytes: (n: number) => void = () => {},
): Promise<number> {
  let source: AsyncIterable<Buffer> | Iterable<Buffer>
  if (typeof input === 'string' && input !== '-' && fileKind(input) === 'plain') {
    // A plain file is read with blocking reads: the replay has nothing else to do meanwhile,
    // and it never waits on the event loop between chunks.
    source = fileChunks(input, onBytes)
  } else {
    const raw: NodeJS.ReadableStream =
      typeof input !== 'string'
        ? input
        : input === '-'
          ? process.stdin
          : createReadStream(input, { highWaterMark: 1 << 20 })
    const it = (raw as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]()
    const first = await it.next()
    if (first.done === true) return 0
    const head = toBuffer(first.value)
    const rest = async function* () {
      onBytes(head.length)
      yield head
      for (;;) {
        const r = await it.next()
        if (r.done === true) return
        const b = toBuffer(r.value)
        onBytes(b.length)
        yield b
      }
    }
    const gzip = head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b
    source = gzip ? Readable.from(rest()).pipe(createGunzip()) : rest()
  }
  let line = 0
  let carry: Buffer | undefined
  let skipping = false
  const emit = (buf: Buffer, s: number, e: number) => {
    line++
    // A UTF-8 byte order mark (Windows editors, PowerShell) opens the file, not its first line:
    // kept, it made the first client another key and the first JSON line no JSON.
    if (line === 1 && e - s >= 3 && buf[s] === 0xef && buf[s + 1] === 0xbb && buf[s + 2] === 0xbf) s += 3
    if (e > s && buf[e - 1] === CR) e--
    if (e > s) onLine(buf, s, e, line)
  }
  const feed = (chunk: Buffer): void => {
    let s = 0
    if (carry !== undefined || skipping) {
      const nl = chunk.indexOf(NL)
      if (nl < 0) {
        if (!skipping) {
          carry = Buffer.concat([carry as Buffer, chunk])
          if (carry.length > MAX_LINE_BYTES) {
            skipping = true
            carry = undefined
          }
        }
        return
      }
      if (skipping || (carry as Buffer).length + nl > MAX_LINE_BYTES) {
        line++
        onTooLong(line)
        skipping = false
      } else {
        const joined = Buffer.concat([carry as Buffer, chunk.subarray(0, nl)])
        emit(joined, 0, joined.length)
      }
      carry = undefined
      s = nl + 1
    }
    for (;;) {
      const nl = chunk.indexOf(NL, s)
      if (nl < 0) break
      if (nl - s > MAX_LINE_BYTES) {
        line++
        onTooLong(line)
      } else emit(chunk, s, nl)
      s = nl + 1
    }
    if (s < chunk.length) {
      if (chunk.length - s > MAX_LINE_BYTES) skipping = true
      else carry = Buffer.from(chunk.subarray(s))
    }
  }
  try {
    for await (const chunk of source) feed(chunk)
  } catch (error) {
    // A corrupt or truncated gzip stream is bad input (exit 2), not a bug: say which input, where.
    const code = (error as NodeJS.ErrnoException).code
    if (typeof code !== 'string' || !code.startsWith('Z_')) throw error
    const name = typeof input === 'string' ? (input === '-' ? 'standard input' : input) : 'input'
    throw new UsageError(
      `${name}: not a valid gzip stream after line ${line} (${(error as Error).message})`,
      {
        cause: error,
      },
    )
  }
  if (skipping) {
    line++
    onTooLong(line)
  } else if (carry !== undefined) emit(carry, 0, carry.length)
  return line
}

/**
 * How a file is read: a regular file by blocking reads (`plain`) or gunzipped (`gzip`, by its magic
 * bytes); anything else — a named pipe (`<(zcat access.log.gz)`, mkfifo), `/dev/stdin` — as a
 * stream, its gzip told by its first bytes (it cannot be read at an offset, nor opened twice).
 */
function fileKind(file: string): 'plain' | 'gzip' | 'stream' {
  // Not opened to tell: opening a pipe blocks until its writer opens it.
  const stats = statSync(file)
  // A directory opens, and its first read fails with an EISDIR that names no file.
  if (stats.isDirectory()) throw new UsageError(`${file}: a directory, not a log file`)
  if (!stats.isFile()) return 'stream'
  const fd = openSync(file, 'r')
  try {
    const magic = Buffer.alloc(2)
    return readSync(fd, magic, 0, 2, 0) === 2 && magic[0] === 0x1f && magic[1] === 0x8b ? 'gzip' : 'plain'
  } finally {
    closeSync(fd)
  }
}

/**
 * A file's bytes in 4 MiB chunks, read synchronously into one buffer, reused: each chunk is
 * consumed before the next is read (a line's tail is copied, and the parsers keep no slices), so
 * the replay touches the same 4 MiB instead of faulting in fresh memory for every chunk.
 */
function* fileChunks(file: string, onBytes: (n: number) => void): Generator<Buffer> {
  const fd = openSync(file, 'r')
  const chunk = Buffer.allocUnsafe(1 << 22)
  try {
    for (;;) {
      const n = readSync(fd, chunk, 0, chunk.length, null)
      if (n === 0) return
      onBytes(n)
      yield n === chunk.length ? chunk : chunk.subarray(0, n)
    }
  } finally {
    closeSync(fd)
  }
}

function toBuffer(v: Buffer | string): Buffer {
  return typeof v === 'string' ? Buffer.from(v) : v
}
