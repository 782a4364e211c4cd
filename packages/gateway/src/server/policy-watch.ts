import { type FSWatcher, lstatSync, readlinkSync, watch } from 'node:fs'
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
  /** Stops watching: closes the watchers and clears the timers. */
  close(): void
}

/** How long events have to pause before the file is read. */
const DEBOUNCE_MS = 100
/** How long after the first event of a burst the file is read at the latest. */
const MAX_WAIT_MS = 1_000

/**
 * Watches the policy file for changes. Folders, not the file: editors and deploy tools replace
 * files by renaming, and a Kubernetes ConfigMap swaps a symlink (`p.yaml -> ..data/p.yaml`) that
 * has another name. The folder of every symlink on the way to the file (`current ->
 * releases/N`, `..data`) is watched, and the file's own folder at the end of the links; the way
 * is walked again after every change, as a link may now lead elsewhere. Only events for those
 * names count.
 *
 * @throws when the folder the file is in cannot be watched at start.
 * @example const watching = watchPolicy({ file: '/etc/edgelimit/p.yaml', log, changed: () => void reload() })
 */
export function watchPolicy(options: PolicyWatchOptions): PolicyWatch {
  const { file, log } = options
  const watchers = new Map<string, FSWatcher>()
  // The names that matter in each watched folder: the links and the file on the way.
  const names = new Map<string, Set<string>>()
  let timer: NodeJS.Timeout | undefined
  let firstEvent: number | undefined

  const follow = (atStart: boolean) => {
    names.clear()
    for (const hop of pathHops(file)) {
      const set = names.get(hop.dir) ?? new Set()
      names.set(hop.dir, set.add(hop.name))
    }
    for (const [dir, w] of watchers) {
      if (names.has(dir)) continue
      w.close()
      watchers.delete(dir)
    }
    const last = [...names.keys()].at(-1)
    for (const dir of names.keys()) {
      if (watchers.has(dir)) continue
      try {
        const w = watch(dir, { persistent: false }, (_, name) => event(dir, name))
        w.on('error', (error) => log.warn({ err: error.message, dir }, 'watching the policy file failed'))
        watchers.set(dir, w)
      } catch (error) {
        if (atStart && dir === last) throw error
        log.warn({ err: (error as Error).message, dir }, 'watching the policy file failed')
      }
    }
  }
  // An event for another file in a watched folder (a log written there) is not one: only where
  // the platform gives no name does every event count. A burst is read 100 ms after its last
  // event, and never later than 1 s after its first.
  const event = (dir: string, name: string | null) => {
    if (name !== null && names.get(dir)?.has(name) === false) return
    const now = performance.now()
    firstEvent ??= now
    clearTimeout(timer)
    timer = setTimeout(fire, Math.min(DEBOUNCE_MS, firstEvent + MAX_WAIT_MS - now)).unref()
  }
  const fire = () => {
    firstEvent = undefined
    follow(false)
    options.changed()
  }
  follow(true)
  return {
    close() {
      clearTimeout(timer)
      for (const w of watchers.values()) w.close()
      watchers.clear()
    },
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
