// Runs Workers in the real workerd runtime through miniflare: bundles an entry with esbuild
// (the library from source or dist, `cloudflare:workers` left to the runtime) and starts it with
// SQLite-backed Durable Objects. Every test file starts its own runtime and disposes of it.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { build } from 'esbuild'
import { Miniflare, type MiniflareOptions } from 'miniflare'

export const pkg = join(import.meta.dirname, '..', '..', '..')
export const root = join(pkg, '..', '..')

/** The compatibility date every test Worker runs with (supported by miniflare's workerd). */
export const COMPATIBILITY_DATE = '2025-09-01'

/** Bundles a Worker entry into one ES module, as wrangler would. */
export async function bundle(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    conditions: ['workerd', 'worker', 'import'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:workers'],
    loader: { '.lua': 'text' },
    write: false,
    logLevel: 'silent',
  })
  return result.outputFiles[0]?.text ?? ''
}

/**
 * A directory for Durable Object storage: on tmpfs when there is one, because every write is
 * made durable before the object answers, and an fsync to disk would dominate what is measured.
 */
export function storageDir(): string {
  return mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'edgelimit-workerd-'))
}

/** A running workerd. */
export interface Running {
  readonly mf: Miniflare
  fetch(path: string, init?: RequestInit): Promise<Response>
  dispose(): Promise<void>
}

export interface StartOptions extends Partial<MiniflareOptions> {
  /** Binding name → Durable Object class exported by the entry (SQLite-backed unless told). */
  durableObjects?: Record<string, string | { className: string; useSQLite: boolean }>
  /** Keeps storage in this directory (and does not delete it): to restart on the same state. */
  persistTo?: string
}

/** Starts the entry in workerd with its Durable Object classes bound. */
export async function startWorker(entry: string, options: StartOptions = {}): Promise<Running> {
  const { durableObjects = {}, persistTo, ...rest } = options
  const dir = persistTo ?? storageDir()
  const mf = new Miniflare({
    modules: true,
    script: await bundle(entry),
    scriptPath: entry.replace(/\.[mc]?[jt]s$/, '.js'),
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: Object.fromEntries(
      Object.entries(durableObjects).map(([binding, c]) => [
        binding,
        typeof c === 'string' ? { className: c, useSQLite: true } : c,
      ]),
    ),
    durableObjectsPersist: dir,
    ...rest,
  } as MiniflareOptions)
  await mf.ready
  return {
    mf,
    fetch: (path, init) =>
      mf.dispatchFetch(`http://worker${path}`, init as never) as unknown as Promise<Response>,
    async dispose() {
      await mf.dispose()
      if (persistTo === undefined) rmSync(dir, { recursive: true, force: true })
    },
  }
}
