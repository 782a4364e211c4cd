import { createHash } from 'node:crypto'
import type { Clock } from 'edgelimit'
import type { Logger } from 'pino'
import { formatIssue } from '../config/issues.js'
import { readPolicySource } from '../config/source.js'
import type { GatewayConfig, UpstreamConfig } from '../config/types.js'
import { checkSource } from '../config/validate.js'
import { type CompiledPolicy, compilePolicy, type EventSink } from '../policy/compile.js'
import { openStore } from '../policy/store.js'
import { openUpstream } from '../proxy/forward.js'
import type { ReloadResult } from './gateway.js'
import type { Generation, Generations } from './generation.js'
import type { Metrics } from './metrics.js'
import type { PolicyWatch } from './policy-watch.js'
import type { ProxyServer } from './proxy-server.js'
import { warnAbout } from './warn-about.js'

/** What a reload needs of the gateway. */
export interface ReloaderOptions {
  readonly file: string
  readonly env: Readonly<Record<string, string | undefined>>
  readonly storeTimeoutMs: number
  readonly log: Logger
  readonly metrics: Metrics
  readonly clock: Clock
  readonly sink: EventSink
  /** The upstream a policy names (or the flag's, or the demo origin's). */
  readonly upstreamFor: (config: GatewayConfig) => Promise<UpstreamConfig>
  readonly proxy: ProxyServer
  readonly generations: Generations
}

/** Reloads of the policy file, one at a time. */
export interface Reloader {
  /**
   * Loads the file again (`onlyIfChanged`: only when its content changed since the last look)
   * and puts it in force; never rejects.
   */
  reload(reason?: string, onlyIfChanged?: boolean): Promise<ReloadResult>
  /** The last reload asked for: shutdown waits for it. */
  readonly reloading: Promise<ReloadResult>
  /** The file's watcher, which an explicit reload re-arms. */
  watching: PolicyWatch | undefined
}

/**
 * Creates the gateway's reloads: an invalid file, or one whose store or upstream cannot be opened,
 * is rejected (and logged) and the current policy stays.
 *
 * @example const reloader = createReloader({ file, env, storeTimeoutMs, log, metrics, clock, sink, upstreamFor, proxy, generations })
 */
export function createReloader(options: ReloaderOptions): Reloader {
  const { file, env, storeTimeoutMs, log, metrics, clock, sink, upstreamFor, proxy, generations } = options
  const { users, opening } = generations
  // The digest of the text the last reload read (or why it could not): a watch-triggered reload
  // acts only on a new one.
  let lastSeen = digest(proxy.current.text)
  let reloading: Promise<ReloadResult> = Promise.resolve({
    ok: true,
    issues: [],
  })
  let watching: PolicyWatch | undefined
  function reload(reason = 'manual', onlyIfChanged = false): Promise<ReloadResult> {
    // An explicit reload also watches the file anew, whatever became of its folders.
    if (!onlyIfChanged && !proxy.draining) watching?.rearm()
    // A reload never rejects: one that throws is a failed reload, and the next one still runs.
    reloading = reloading.then(() => doReload(reason, onlyIfChanged)).catch((error) => failed(reason, error))
    return reloading
  }

  function failed(reason: string, error: unknown): ReloadResult {
    metrics.reload('failure')
    const message = error instanceof Error ? error.message : String(error)
    log.error(
      { reason, generation: proxy.current.id, err: message },
      `policy rejected (${message}); generation ${proxy.current.id} stays in force`,
    )
    return { ok: false, issues: [], error: message }
  }

  // A reload asked for or found while the gateway stops: nothing is put in force, and it says why.
  function abandoned(reason: string): ReloadResult {
    log.info({ reason, generation: proxy.current.id }, 'reload abandoned: the gateway is stopping')
    return { ok: false, issues: [], error: STOPPING.message }
  }

  async function doReload(reason: string, onlyIfChanged: boolean): Promise<ReloadResult> {
    if (proxy.draining) return abandoned(reason)
    const source = readPolicySource(file, env)
    // A file that cannot be read is seen as its error: reported (and counted) once, as an invalid
    // text is; the watcher only reads a file that stayed so for a while (not one mid-replace).
    const unreadable = source.issues.find((i) => i.code === 'ERR_FILE')
    const seen = unreadable === undefined ? digest(source.text) : unreadable.message
    if (onlyIfChanged) {
      // Only a change of content counts: a text already tried (and rejected) is not tried again
      // on every event in the folder, which a log file there would turn into a loop.
      if (seen === lastSeen) return { ok: true, issues: [] }
      const before = lastSeen
      lastSeen = seen
      const inForce = digest(proxy.current.text)
      if (seen === inForce) {
        // Back to the text in force after a rejected one (an edit undone, the file restored):
        // nothing to reload, but the operator who saw the rejection is told it is over.
        if (before !== inForce) {
          metrics.fileInForce()
          log.info(
            { reason, generation: proxy.current.id },
            `policy file is the text in force again; generation ${proxy.current.id} stays in force`,
          )
        }
        return { ok: true, issues: [] }
      }
    } else lastSeen = seen
    const { config, issues } = checkSource(source)
    if (config === undefined) {
      metrics.reload('failure')
      log.error(
        { reason, generation: proxy.current.id, issues: issues.map(formatIssue) },
        `policy rejected (${issues.length} problem${issues.length === 1 ? '' : 's'}); generation ${proxy.current.id} stays in force`,
      )
      return { ok: false, issues }
    }
    const old = proxy.current
    // Whatever the new policy opens is closed again if it cannot be put in force.
    let store = old.policy.store
    let upstream = old.upstream
    let policy: CompiledPolicy
    try {
      if (JSON.stringify(config.store) !== store.signature) {
        store = await openStore(config.store)
        opening.add(store)
        try {
          if (!proxy.draining) await store.ready(storeTimeoutMs)
        } catch (error) {
          if (!proxy.draining) throw new Error(`new store unreachable: ${(error as Error).message}`)
        }
        opening.delete(store)
      }
      // close() may have begun during a wait: what this reload opened is closed, not put in force.
      if (proxy.draining) throw STOPPING
      const upstreamConfig = await upstreamFor(config)
      if (proxy.draining) throw STOPPING
      if (JSON.stringify(upstreamConfig) !== old.upstream.signature) upstream = openUpstream(upstreamConfig)
      policy = compilePolicy(config, store, old.policy, sink, clock)
    } catch (error) {
      opening.delete(store)
      if (store !== old.policy.store) await store.close().catch(() => {})
      if (upstream !== old.upstream) await upstream.close().catch(() => {})
      if (error !== STOPPING) return failed(reason, error)
      return abandoned(reason)
    }
    warnAbout(config, log)
    const next: Generation = {
      id: old.id + 1,
      policy,
      upstream,
      text: source.text,
      inFlight: 0,
      retired: false,
    }
    for (const resource of [store, upstream]) users.set(resource, (users.get(resource) ?? 0) + 1)
    proxy.putInForce(next)
    const kept = [...policy.limiters.values()].filter((l) =>
      [...old.policy.limiters.values()].includes(l),
    ).length
    metrics.reload('success')
    metrics.generation.set(next.id)
    metrics.inForce(policy.rules, !policy.store.inProcess)
    log.info(
      {
        reason,
        generation: next.id,
        rules: config.rules.map((r) => r.name),
        limitersKept: kept,
        limitersNew: policy.limiters.size - kept,
        storeKept: store === old.policy.store,
        upstreamKept: upstream === old.upstream,
      },
      'policy reloaded',
    )
    return { ok: true, issues: [] }
  }

  return {
    reload,
    get reloading() {
      return reloading
    },
    get watching() {
      return watching
    },
    set watching(watch: PolicyWatch | undefined) {
      watching = watch
    },
  }
}

/** Thrown inside a reload that finds the gateway stopping: what it opened is closed, nothing logged as a failure. */
const STOPPING = new Error('the gateway is stopping')

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}
