import { type FSWatcher, lstatSync, readlinkSync, realpathSync, statSync, watch } from 'node:fs'
import { basename, dirname, isAbsolute, join, sep } from 'node:path'
import type { Logger } from 'pino'

/** Options of `watchPolicy`. */
export interface PolicyWatchOptions {
  /** The policy file, an absolute path. */
  readonly file: string
  readonly log: Logger
  /** Called when the file may have changed; the caller reads it and compares. */
  readonly changed: () => void
}

/** A running watch of the policy file. */
export interface PolicyWatch {
  /** Watches every folder anew (on an explicit reload: SIGHUP, the admin API). */
  rearm(): void
  /** Stops watching: closes the watchers and clears the timers. */
  close(): void
}

/** How long events have to pause before the file is read. */
const DEBOUNCE_MS = 100
/** How long after the first event of a burst the file is read at the latest. */
const MAX_WAIT_MS = 1_000
/** How long the file must have stayed unchanged before it is read. */
const SETTLE_MS = 500
/** How often the file and the folders on its way are checked without an event. */
const POLL_MS = 2_000

/**
 * Watches the policy file for changes. Folders, not the file: editors and deploy tools replace
 * files by renaming, and a Kubernetes ConfigMap swaps a symlink (`p.yaml -> ..data/p.yaml`) that
 * has another name. The folder of every symlink on the way to the file (`current ->
 * releases/N`, `..data`) is watched, and the file's own folder at the end of the links; the way
 * is walked again after every change, as a link may now lead elsewhere. Only events for those
 * names count, and the file is read only once it has stayed unchanged for 0.5 s. Every 2 s the file (where the links lead, inode, size, mtime) and the folders'
 * inodes are checked too: a folder replaced under its watcher is watched again.
 *
 * @throws when the folder the file is in cannot be watched at start.
 * @example const watching = watchPolicy({ file: '/etc/edgelimit/p.yaml', log, changed: () => void reload() })
 */
export function watchPolicy(options: PolicyWatchOptions): PolicyWatch {
  const { file, log } = options
  // Each folder's watcher with the folder's `dev:ino` when it was set: a folder deleted and
  // created again, or another renamed into its place, is a new inode its watcher does not see.
  const watchers = new Map<string, { readonly watcher: FSWatcher; readonly inode: string | undefined }>()
  // The names that matter in each watched folder: the links and the file on the way.
  const names = new Map<string, Set<string>>()
  let timer: NodeJS.Timeout | undefined
  let firstEvent: number | undefined
  // What the file was (see `look`) when it was last read: the poll wakes up on any other.
  let seen = look(file).key

  // Folders whose watcher was dropped as they were replaced: watched again by the next `follow`.
  const lost = new Set<string>()
  // Folders that could not be watched: logged once, tried again by every `follow`.
  const failing = new Set<string>()
  let closed = false
  const closeAll = () => {
    for (const w of watchers.values()) w.watcher.close()
    watchers.clear()
  }
  const forget = (dir: string, watcher: FSWatcher) => {
    watcher.close()
    if (watchers.get(dir)?.watcher !== watcher) return
    watchers.delete(dir)
    lost.add(dir)
  }

  /** Watches the folders on the way to the file; whether a folder watched before was replaced. */
  const follow = (atStart: boolean): boolean => {
    names.clear()
    for (const hop of pathHops(file)) {
      const set = names.get(hop.dir) ?? new Set()
      names.set(hop.dir, set.add(hop.name))
    }
    let replaced = false
    for (const [dir, w] of watchers) {
      const inode = inodeOf(dir)
      if (names.has(dir) && inode === w.inode) continue
      w.watcher.close()
      watchers.delete(dir)
      if (names.has(dir)) {
        replaced = true
        lost.add(dir)
      }
    }
    const last = [...names.keys()].at(-1)
    for (const dir of names.keys()) {
      if (watchers.has(dir)) continue
      try {
        const inode = inodeOf(dir)
        const watcher = watch(dir, { persistent: false }, (_, name) => {
          // The folder itself deleted or renamed away (Linux names it): its watcher sees no more,
          // and the inode number may come back with the folder created again.
          const self = name === basename(dir)
          if (self) forget(dir, watcher)
          // An event for another file in a watched folder (a log written there) is not one: only
          // where the platform gives no name does every event count.
          if (self || name === null || names.get(dir)?.has(name) !== false) wake()
        })
        watcher.on('error', (error) => {
          log.warn({ err: error.message, dir }, 'watching the policy file failed; watching it again')
          forget(dir, watcher)
          wake()
        })
        watchers.set(dir, { watcher, inode })
        failing.delete(dir)
        if (lost.delete(dir)) log.info({ dir }, 'watching the policy file again: its folder was replaced')
      } catch (error) {
        if (atStart && dir === last) throw error
        if (failing.has(dir)) continue
        failing.add(dir)
        log.warn({ err: (error as Error).message, dir }, 'watching the policy file failed')
      }
    }
    return replaced
  }
  // A burst is read 100 ms after its last event, and never later than 1 s after its first.
  const wake = () => {
    if (closed) return
    const now = performance.now()
    firstEvent ??= now
    clearTimeout(timer)
    timer = setTimeout(fire, Math.min(DEBOUNCE_MS, firstEvent + MAX_WAIT_MS - now)).unref()
  }
  // The file is read once it has stayed as it is for SETTLE_MS (since its last write, or since it
  // was first seen so when its time says nothing: a missing file, a clock ahead): an in-place
  // write that pauses is not read half-done, nor a file missing for a moment mid-replace.
  let settling: { readonly key: string; readonly since: number } | undefined
  const fire = () => {
    firstEvent = undefined
    follow(false)
    const now = look(file)
    if (now.key !== settling?.key) settling = { key: now.key, since: performance.now() }
    const quiet = Math.max(
      performance.now() - settling.since,
      now.mtimeMs === undefined ? 0 : Date.now() - now.mtimeMs,
    )
    if (quiet < SETTLE_MS) {
      clearTimeout(timer)
      timer = setTimeout(fire, SETTLE_MS - quiet).unref()
      return
    }
    settling = undefined
    seen = now.key
    options.changed()
  }
  follow(true)
  // The fallback for what no event tells: a folder replaced under its watcher (renamed away), a
  // platform that drops events.
  const poll = setInterval(() => {
    if (follow(false) || look(file).key !== seen) wake()
  }, POLL_MS).unref()
  return {
    rearm() {
      if (closed) return
      closeAll()
      follow(false)
      seen = look(file).key
    },
    close() {
      closed = true
      clearTimeout(timer)
      clearInterval(poll)
      closeAll()
    },
  }
}

/** The `dev:ino` of a path (undefined when it is gone). */
function inodeOf(path: string): string | undefined {
  try {
    const s = statSync(path)
    return `${s.dev}:${s.ino}`
  } catch {
    return undefined
  }
}

/**
 * What the file is, to tell a change without reading it (`key`): the path the links lead to, its
 * inode, size and modification time; or the error that keeps it from being seen.
 */
function look(file: string): { readonly key: string; readonly mtimeMs?: number } {
  try {
    const real = realpathSync(file)
    const s = statSync(real)
    return { key: `${real} ${s.dev}:${s.ino} ${s.size} ${s.mtimeMs}`, mtimeMs: s.mtimeMs }
  } catch (error) {
    return { key: `error ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}` }
  }
}

/** One step on the way to the policy file: the name `name` in the folder `dir`. */
export interface PathHop {
  readonly dir: string
  readonly name: string
}

/** At most this many symlinks on the way (Linux's own limit): a loop ends the walk. */
const MAX_LINKS = 40

/**
 * The way to `file` (absolute), resolved one component at a time: every symlink met (its folder
 * and name), then the file it ends at. A component that does not exist ends the walk there (its
 * folder tells when it is back).
 *
 * @example pathHops('/srv/app/current/p.yaml') // [{ dir: '/srv/app', name: 'current' }, { dir: '/srv/app/releases/2', name: 'p.yaml' }]
 */
export function pathHops(file: string): PathHop[] {
  const hops: PathHop[] = []
  let parts = file.split(sep).filter((p) => p !== '')
  let at: string = sep
  let links = 0
  while (parts.length > 0) {
    const name = parts.shift() as string
    if (name === '.') continue
    if (name === '..') {
      at = dirname(at)
      continue
    }
    const path = join(at, name)
    let link: string | undefined
    try {
      if (lstatSync(path).isSymbolicLink()) link = readlinkSync(path)
    } catch {
      hops.push({ dir: at, name })
      return hops
    }
    if (link === undefined || links >= MAX_LINKS) {
      at = path
      continue
    }
    links++
    hops.push({ dir: at, name })
    parts = [...link.split(sep).filter((p) => p !== ''), ...parts]
    if (isAbsolute(link)) at = sep
  }
  hops.push({ dir: dirname(at), name: basename(at) })
  return hops
}
