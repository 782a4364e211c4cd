import { constants, type Stats } from 'node:fs'
import { access, mkdir, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { type ParseArgsConfig, parseArgs } from 'node:util'
import { parseDuration } from 'edgelimit'

/** A writable text stream: `process.stdout` or anything with `write`. */
export interface TextOut {
  write(chunk: string): unknown
  readonly isTTY?: boolean
  readonly columns?: number
}

/**
 * Where a command writes: its output (tables) and its diagnostics (progress, errors).
 * `process` itself is one.
 */
export interface CliIo {
  readonly stdout: TextOut
  readonly stderr: TextOut
  /** Relative paths resolve against it (a directory, or a function returning one). @default process.cwd() */
  readonly cwd?: string | (() => string)
}

/** The directory relative paths resolve against. */
export function workingDirectory(io: CliIo): string {
  return typeof io.cwd === 'function' ? io.cwd() : (io.cwd ?? process.cwd())
}

/** A usage or input problem: printed without a stack, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

/**
 * Node's `parseArgs`, with an unknown or malformed option reported as a usage error (exit code 2)
 * rather than thrown as a TypeError.
 *
 * @example const { values } = parseCommandArgs({ args, strict: true, options: { json: { type: 'string' } } })
 */
export function parseCommandArgs<const C extends ParseArgsConfig>(
  config: C,
): ReturnType<typeof parseArgs<C>> {
  try {
    return parseArgs(config)
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

/**
 * Runs a CLI command: a usage error, an input error (`isInputError`) or an unreadable file is
 * printed as `edgelimit <command>: <message>` with exit code 2; anything else is a bug and throws.
 */
export async function runCommand(
  command: string,
  io: CliIo,
  work: () => Promise<number>,
  isInputError: (error: unknown) => boolean,
): Promise<number> {
  try {
    return await work()
  } catch (error) {
    const code = error instanceof Error ? (error as NodeJS.ErrnoException).code : undefined
    if (error instanceof UsageError || isInputError(error) || (code !== undefined && FILE_ERRORS.has(code))) {
      io.stderr.write(`edgelimit ${command}: ${(error as Error).message}\n`)
      return 2
    }
    throw error
  }
}

/** What a file named on the command line can fail with: the file's problem, not a bug (exit 2). */
const FILE_ERRORS = new Set(['ENOENT', 'EACCES', 'EISDIR', 'ENOTDIR', 'EEXIST', 'ELOOP', 'ENAMETOOLONG'])

/**
 * Fails now, with the error `writeOutput` would give at the end, if `file` cannot be written:
 * for a command that runs a while before it writes. Creates the directory, not the file.
 * Returns the file's stats when it exists already.
 *
 * @example await checkOutput(path.resolve('bench/results/run.json'))
 */
export async function checkOutput(file: string): Promise<Stats | undefined> {
  await makeFolder(file)
  // Absent is fine (it is made); a path that cannot be reached (a link loop) fails the write too.
  const existing = await stat(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined
    throw error
  })
  if (existing?.isDirectory())
    throw Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${file}'`), {
      code: 'EISDIR',
    })
  await access(existing === undefined ? path.dirname(file) : file, constants.W_OK)
  return existing
}

/**
 * `checkOutput` for the file an output flag names: a directory given as the file is named by its
 * flag (`--html reports/ is a directory`), with a file name to give instead; other errors (which
 * name the file) go on as they are.
 */
async function checkFlagOutput(flag: string, file: string): Promise<Stats | undefined> {
  try {
    return await checkOutput(file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EISDIR') throw error
    const example = path.join(file, `report${flag.replace(/^--/, '.')}`)
    throw new UsageError(`${flag} ${file} is a directory: give a file name (${flag} ${example})`, {
      cause: error,
    })
  }
}

/**
 * Fails now, before a long run, where an output cannot be written (`checkOutput`) or is one of the
 * files the command reads (the same file by device and inode: through a link or another spelling
 * of its path too), or where two outputs are one file: the report would overwrite its input, or
 * the one output the other. `-` (standard input) and absent entries are skipped.
 *
 * @example await checkOutputs([['--html', at('r.html')]], [['log', at('access.log')]])
 */
export async function checkOutputs(
  outputs: ReadonlyArray<readonly [flag: string, file: string | undefined]>,
  inputs: ReadonlyArray<readonly [what: string, file: string | undefined]>,
): Promise<void> {
  const identity = (s: Stats | undefined) => (s === undefined ? undefined : `${s.dev}:${s.ino}`)
  const read = await Promise.all(
    inputs.map(
      async ([what, file]) =>
        [
          what,
          file === undefined || file === '-' ? undefined : identity(await stat(file).catch(() => undefined)),
        ] as const,
    ),
  )
  const written: Array<readonly [string, string]> = []
  for (const [flag, file] of outputs) {
    if (file === undefined) continue
    // A file not there yet is no input; two outputs not there yet are one where their paths are.
    const id = identity(await checkFlagOutput(flag, file)) ?? `path:${path.resolve(file)}`
    const input = read.find(([, other]) => other === id)
    if (input !== undefined)
      throw new UsageError(
        `${flag} ${file} is the ${input[0]} this command reads: writing it would overwrite its input; give another file`,
      )
    const twin = written.find(([, other]) => other === id)
    if (twin !== undefined)
      throw new UsageError(`${flag} and ${twin[0]} are the same file (${file}): give two files`)
    written.push([flag, id])
  }
}

/** Where a command's outputs go: see `outputsOf`. */
export interface Outputs {
  /** Where the command's own table and notes go: standard error when an output is on standard output. */
  readonly report: TextOut
  /** The file an output flag names, resolved; `undefined` when the flag is absent or `-`. */
  file(flag: string): string | undefined
  /** Writes an output: to standard output for `-`, else to its file (`writeOutput`); absent: nothing. */
  write(flag: string, text: () => string): Promise<void>
}

/**
 * The outputs of a command's file flags (`--json <file>`, `--html <file>`), by flag: `-` is
 * standard output, for one of them at most; then the command's table goes to standard error, so
 * that what a pipe reads is that output alone. Other values are paths resolved by `at`.
 *
 * @example const out = outputsOf(io, at, { '--json': values.json }); await out.write('--json', () => text)
 */
export function outputsOf(
  io: CliIo,
  at: (file: string) => string,
  flags: Readonly<Record<string, string | undefined>>,
): Outputs {
  const piped = Object.keys(flags).filter((flag) => flags[flag] === '-')
  if (piped.length > 1)
    throw new UsageError(
      `only one output can go to standard output (${piped.map((flag) => `${flag} -`).join(', ')}): give the others a file`,
    )
  const file = (flag: string) => {
    const value = flags[flag]
    return value === undefined || value === '-' ? undefined : at(value)
  }
  return {
    report: piped.length > 0 ? io.stderr : io.stdout,
    file,
    async write(flag, text) {
      const target = file(flag)
      if (target !== undefined) await writeOutput(target, text())
      else if (flags[flag] === '-') io.stdout.write(text())
    },
  }
}

/** Writes a file, creating its folder. */
export async function writeOutput(file: string, text: string): Promise<void> {
  await makeFolder(file)
  try {
    await writeFile(file, text)
  } catch (error) {
    // A full disk, a read-only or failing device: the output could not be written (exit 2), and
    // the message says which file (a failed write's own message does not).
    const code = (error as NodeJS.ErrnoException).code
    if (code !== undefined && OUTPUT_ERRORS.has(code))
      throw new UsageError(`cannot write ${file}: ${(error as Error).message}`, { cause: error })
    throw error
  }
}

const OUTPUT_ERRORS = new Set(['EIO', 'ENOSPC', 'EROFS', 'EPERM', 'EDQUOT', 'EFBIG'])

/**
 * Creates the missing folders of `file`'s path, one level at a time: Node 20's recursive mkdir
 * never settles (and spins) where a folder cannot be made under one that exists (`/proc/x`).
 */
async function makeFolder(file: string): Promise<void> {
  const absent = (error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined
    throw error
  }
  const missing: string[] = []
  let dir = path.dirname(file)
  let found = await stat(dir).catch(absent)
  while (found === undefined) {
    missing.unshift(dir)
    dir = path.dirname(dir)
    found = await stat(dir).catch(absent)
  }
  if (!found.isDirectory())
    throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR' })
  for (const folder of missing) {
    try {
      await mkdir(folder)
    } catch (error) {
      // Made meanwhile by someone else: fine.
      if (
        (error as NodeJS.ErrnoException).code === 'EEXIST' &&
        (await stat(folder).catch(() => undefined))?.isDirectory()
      )
        continue
      throw new UsageError(`cannot write ${file}: ${(error as Error).message}`, { cause: error })
    }
  }
}

/**
 * Parses a duration flag (`500ms`, `2s`, `1m`…); `fallback` when it is absent. `example` names a
 * good value in the usage error.
 *
 * @example durationFlag('window', values.window, 60_000, '60s')
 */
export function durationFlag<F extends number | undefined>(
  flag: string,
  value: string | undefined,
  fallback: F,
  example: string,
): number | F {
  if (value === undefined) return fallback
  const ms = parseDuration(value)
  if (ms === undefined) throw new UsageError(`--${flag}: expected a duration like ${example}, got "${value}"`)
  return ms
}

/** The most a rule's limit can be (the library's bound on integers, 2^31 − 1). */
export const MAX_LIMIT = 2 ** 31 - 1

/**
 * A number flag's value written in decimal digits (`_` may group them: `1_000`), or NaN for
 * anything else (`1e3`, `0x10`, `2.0`, `+4`, `''`): what `positiveInt` and lists of numbers read.
 *
 * @example decimalDigits('1_000') // 1000
 */
export function decimalDigits(value: string): number {
  return /^\d+(_\d+)*$/.test(value) ? Number(value.replace(/_/g, '')) : Number.NaN
}

/**
 * Parses a whole, positive number flag written in decimal digits (`_` may group them: `1_000`),
 * up to `max`; `1e3`, `0x10` and `''` are usage errors quoting what was typed.
 */
export function positiveInt(
  flag: string,
  value: string | undefined,
  fallback: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (value === undefined) return fallback
  const n = decimalDigits(value)
  if (!Number.isSafeInteger(n) || n < 1 || n > max) {
    const bound = max === Number.MAX_SAFE_INTEGER ? '' : ` up to ${max}`
    throw new UsageError(`--${flag}: expected a positive whole number${bound}, got "${value}"`)
  }
  return n
}
