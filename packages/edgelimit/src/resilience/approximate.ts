import type { Clock } from '../clock.js'
import { gcd } from '../core/math.js'
import { EdgelimitError } from '../errors.js'
import type { DecisionSource } from '../events.js'
import type { RuleVerdict, StoreRule } from '../stores/types.js'
import { within } from './deadline.js'

/** A sync sent and not answered yet: its batch, and when it went. */
interface Flight {
  readonly cost: number
  readonly at: number
}

/** Per key: what the store said at the last sync, less what this process admitted since. */
interface Entry {
  remaining: number[]
  resetAt: number[]
  /** When the store may admit one more unit, as its last answer tells (see `unitAfter`). */
  retryAt: number[]
  /**
   * A bucket's or GCRA's virtual finish time (TAT), per rule (0 for the windows): for a shaping
   * leaky bucket (`mode: 'shape'`) its queue, for the others when they are full (token bucket) or
   * empty again; as the store's last answer tells, pushed out by what was admitted here since,
   * as `(TAT - base) · r` (see `Step`), in integer arithmetic. The store's TAT is read from its
   * `resetAfterMs`, rounded up to whole ms: where `T` is not whole ms, a delay or reset can come out
   * up to 1 ms longer than the store's own (never shorter; each sync reads it again, so it does not
   * add up).
   */
  tat: number[]
  /** When the key was seeded: the origin of `tat`. */
  base: number
  /** Admitted here, not sent yet. */
  pending: number
  /**
   * Fixed windows only (every rule of the group): the part of `pending` admitted before
   * `closes`, the earliest the windows of the last answer can end (its call's start plus their
   * `resetAfterMs`). A sync at or after `closed`, the latest they can end (when the answer came
   * plus the same), does not send it.
   */
  early: number
  closes: number
  closed: number
  /**
   * Syncs sent that the store has not answered yet, nor given up (they may have counted there
   * already): answers take their batches off.
   */
  flying: Flight[]
  syncedAt: number
  /** The sync in flight (until the store answers it, or it is given up): whether its batch counted. */
  syncing: Promise<boolean> | undefined
  /** The sync whose answer `remaining` holds: an earlier sync's answer, coming later, is stale. */
  answered: number
  /** The key's shadow rules (bit i = rule i of the group), the same on every call for the key. */
  shadow: number
}

/**
 * How many sync intervals a key's next sync waits for the one in flight before it goes anyway: a
 * reply may be lost (a client with no timeout of its own). Not sending again what the unanswered
 * sync carried, the next one cannot charge it twice; nor is that batch taken off the answers
 * after it, which hold it when the store counted it (taken off every later answer, a lost reply
 * would lower the key's quota for as long as the key is counted here).
 */
const GIVE_UP = 4

/** A store call's outcome: the verdicts (`store`), or the rules' fallbacks when it failed. */
export interface StoreAnswer {
  readonly verdicts: readonly RuleVerdict[]
  readonly source: 'store' | 'fallback'
}

/** What the remote decision path lends the approximate counter. */
export interface ApproximateContext {
  /**
   * Charges `cost` to the store for `key` (forced; a rule in `shadow`, the key's shadow rules,
   * only if it admits the whole cost, as it would not count what it denies), through the path's
   * breaker and deadline, which report a failure. Settles with the store call, not the deadline: with its verdicts when
   * the store answers, also after the deadline (the charge counted there); `undefined` when it was
   * not sent (the breaker is open); rejects when the store failed (whether it counted is unknown).
   */
  readonly sync: (
    key: string,
    cost: number,
    now: number,
    shadow: number,
  ) => Promise<readonly RuleVerdict[] | undefined>
  /** The group's rules. */
  readonly rules: readonly StoreRule[]
  readonly intervalMs: number
  /** The limiter's clock: when an answer came (the `now` of calls is when they started). */
  readonly clock: Clock
  /** The store calls' deadline (each settles within it); without one, a reply may never come. */
  readonly timeoutMs: number | undefined
}

/**
 * How long after the store's verdict `v` the rule may admit one more unit (`forced`: the cost of a
 * forced charge, which a denying rule reports as the state before it; 0 for a decision): a fixed
 * window, once it ends; a bucket or GCRA, once its level is a unit under the limit (it drains one
 * unit per `period / limit`; a denial reports the drain of the state before the charge); a sliding
 * window or log frees its counts as they age out, at a pace the verdict does not tell: after the
 * store's own wait when it denied, else after one unit's share of the window.
 */
function unitAfter(rule: StoreRule, v: RuleVerdict, forced: number): number {
  const { algorithm } = rule.policy
  const { limit, periodMs } = rule.compiled
  const unit = periodMs / limit
  if (algorithm === 'fixed-window') return v.resetAfterMs
  if (algorithm !== 'sliding-window' && algorithm !== 'sliding-log') {
    return Math.max(0, v.resetAfterMs + ((v.allowed ? 0 : forced) - limit + 1) * unit)
  }
  return Math.min(
    v.resetAfterMs,
    v.allowed || v.retryAfterMs === Number.POSITIVE_INFINITY ? unit : v.retryAfterMs,
  )
}

/** A bucket's or GCRA's unit, `T = p / r` ms (the reduced fraction); `shape`: a shaping queue. */
interface Step {
  readonly r: number
  readonly p: number
  readonly shape: boolean
}

/** A first call that rejected: the waiting requests fall back as when it failed. */
const FAILED: StoreAnswer = { verdicts: [], source: 'fallback' }

/** Approximate consistency for a group of rules. */
export interface Approximate {
  /**
   * Decides the group for one request: from local counts (source `approximate`), or, for a key
   * with no synced state yet, by `call` — a strict call that also charges the store and whose
   * verdicts seed the key (`store`; `fallback` when the store failed). While a key's first call is
   * in flight, later requests wait for it and are decided from what it seeded; when it failed, by
   * `call(true)`: the rules' fallbacks for the request, with no store call (the store just failed
   * for the key, and a call of their own would wait a second deadline). Without a deadline
   * (`timed: false`) a request waits at most `intervalMs` (a reply may be lost), then its own call
   * seeds the key instead.
   */
  decide(
    key: string,
    cost: number,
    now: number,
    shadow: number,
    call: (failed?: boolean) => Promise<StoreAnswer> | StoreAnswer,
  ): Promise<{ readonly verdicts: readonly RuleVerdict[]; readonly source: DecisionSource }>
  /**
   * Sends every pending count now and waits for the syncs in flight (for shutdown and tests), for
   * no longer than the deadline (without one, `GIVE_UP` intervals: a reply may be lost); rejects (`ERR_EDGELIMIT_STORE`) when a sync failed or is still
   * unanswered then. Counts not sent (the breaker was open) stay pending for the next sync; counts
   * sent are never sent again (the store may have counted them): they are in the store, or lost.
   */
  flush(now: number): Promise<void>
  /**
   * Forgets a key's counts, pending ones too (`limiter.reset`: the store's state goes with them),
   * and its first call in flight, whose answer then seeds nothing.
   */
  reset(key: string): void
  /** Store calls made for syncs. */
  readonly syncs: number
  /** Admissions whose sync failed after it was sent, so that the store may not have counted them. */
  readonly dropped: number
}

/**
 * Counts in-process and syncs deltas to the store in batches: a key's first request goes to the
 * store (and learns its remaining quota; requests that come meanwhile wait for its answer); after
 * that, requests are decided against
 * `remaining − admitted here since the last sync`, and every `intervalMs` the admitted cost is
 * charged to the store in one forced call whose verdict refreshes `remaining`, counting every
 * process's admissions. Over-admission is bounded by what the other processes admit within one
 * sync interval. Syncs happen on the next request after the interval (no timers); `flush()` sends
 * the rest. A key has one sync in flight until the store answers it, past the deadline too (it
 * still counts there); a batch is sent once: when the store fails after it was sent it is dropped
 * rather than charged twice, and only one the breaker kept from the store goes with the next sync.
 * A batch admitted in fixed windows (every rule one) that have ended by its sync is not sent: the
 * store would charge it to the next ones.
 */
export function createApproximate(context: ApproximateContext, maxKeys = 100_000): Approximate {
  const { sync: send, intervalMs, timeoutMs } = context
  const rules = context.rules.length
  const windows = context.rules.every((r) => r.policy.algorithm === 'fixed-window')
  // Buckets and GCRA: each unit admitted here pushes the time the key is fresh again (its
  // `resetAfterMs`) out by `T`, as in the store; a shaping rule also holds each request
  // `delayMs`, its place in the queue. The store's answers and the admissions here since tell.
  const steps = context.rules.map(({ policy }): Step | undefined => {
    const [rate, ms] =
      policy.algorithm === 'token-bucket'
        ? [policy.refillRate, policy.refillIntervalMs]
        : policy.algorithm === 'leaky-bucket'
          ? [policy.leakRate, policy.leakIntervalMs]
          : policy.algorithm === 'gcra'
            ? [policy.limit, policy.periodMs]
            : [0, 0]
    if (rate === 0) return undefined
    const g = gcd(rate, ms)
    return { r: rate / g, p: ms / g, shape: policy.algorithm === 'leaky-bucket' && policy.mode === 'shape' }
  })
  /**
   * Sets a bucket's or GCRA's TAT from the store's verdict `v` for a call made at `now` (the TAT is
   * `resetAfterMs` away: the key is fresh then), plus `units` admitted here and not in it.
   */
  const queue = (entry: Entry, i: number, v: RuleVerdict, now: number, units: number) => {
    const s = steps[i]
    if (s !== undefined) entry.tat[i] = (now - entry.base + v.resetAfterMs) * s.r + units * s.p
  }
  const timed = timeoutMs !== undefined
  const entries = new Map<string, Entry>()
  let syncs = 0
  let dropped = 0

  /** Records an answer's windows (see `Entry.early`), just come; `sent` is when its call went. */
  function windowsOf(entry: Entry, verdicts: readonly RuleVerdict[], sent: number): void {
    if (!windows) return
    // The store reads its clock between the call's start and its answer.
    entry.closes = sent + Math.min(...verdicts.map((v) => v.resetAfterMs))
    entry.closed = context.clock.now() + Math.max(...verdicts.map((v) => v.resetAfterMs))
  }

  function sync(key: string, entry: Entry, now: number): Promise<boolean> {
    // Admitted in windows that have ended: charged now, the store would count them against the
    // next windows (it charges a batch to the window it arrives in, and cannot be told an earlier
    // time), whose quota they would take. Their own windows are over: they are not sent.
    const early = now >= entry.closed ? 0 : entry.early
    const cost = entry.pending - entry.early + early
    const id = ++syncs
    entry.pending = 0
    entry.early = 0
    // Syncs unanswered for GIVE_UP intervals are given up: this one's answer holds their batches
    // when the store counted them, and their own late answers take nothing off again.
    if (entry.flying.length > 0) entry.flying = entry.flying.filter((f) => now - f.at < GIVE_UP * intervalMs)
    const flight: Flight = { cost, at: now }
    entry.flying.push(flight)
    const land = () => {
      const i = entry.flying.indexOf(flight)
      if (i >= 0) entry.flying.splice(i, 1)
    }
    // The next sync is due an interval after this one starts, however it ends.
    entry.syncedAt = now
    const run = send(key, cost, now, entry.shadow)
      .then(
        (verdicts) => {
          land()
          if (verdicts === undefined) {
            // Not sent (the breaker is open): the batch goes with the next sync.
            entry.pending += cost
            entry.early += early
            return false
          }
          if (id < entry.answered) return true
          entry.answered = id
          windowsOf(entry, verdicts, now)
          const flying = entry.flying.reduce((sum, f) => sum + f.cost, 0)
          verdicts.forEach((v, i) => {
            // A forced charge that the rule would have denied reports the state before it (a rule
            // in shadow that denied was not charged: what it would have admitted of the batch is
            // not known here, and it is taken as spent until the next sync).
            const after = v.allowed || cost === 0 ? v.remaining : Math.max(0, v.remaining - cost)
            // Less what was admitted here since: pending, and sent in syncs not answered (nor given up) yet.
            entry.remaining[i] = Math.max(0, after - entry.pending - flying)
            entry.resetAt[i] = now + v.resetAfterMs
            // The forced batch is in the queue, also when the rule denied it (reported before it),
            // but for a rule in shadow for the key, which a batch it denies is not charged to.
            queue(
              entry,
              i,
              v,
              now,
              (v.allowed || (entry.shadow >> i) & 1 ? 0 : cost) + entry.pending + flying,
            )
            entry.retryAt[i] = now + unitAfter(context.rules[i] as StoreRule, v, cost)
          })
          return true
        },
        () => {
          // Sent, and the store failed (the path reported why): it may have counted the batch
          // (a reply lost with the connection, a proxy's 5xx after the script ran). Sending it
          // again could charge it twice: it is dropped, at most one batch per failed sync.
          land()
          dropped += cost
          return false
        },
      )
      .finally(() => {
        if (entry.syncing === run) entry.syncing = undefined
      })
    entry.syncing = run
    return run
  }

  /** Whether the key's sync in flight still holds its next one (see GIVE_UP). */
  const busy = (entry: Entry, now: number) =>
    entry.syncing !== undefined && now - entry.syncedAt < GIVE_UP * intervalMs

  /** Decides from local counts, or `undefined` when the key has no synced state yet. */
  function counted(key: string, cost: number, now: number, shadow: number): RuleVerdict[] | undefined {
    const entry = entries.get(key)
    if (entry === undefined) return undefined
    // Nothing to send, nothing in flight, and the store admits nothing more before its last answer
    // says one more unit may pass: no sync.
    const idle =
      entry.syncing === undefined &&
      entry.pending === 0 &&
      entry.remaining.every((r, i) => r === 0 && now < (entry.retryAt[i] as number))
    // Spent and synced, and the time its denials gave (`retryAfterMs`) has come: the store decides
    // this request, as a first one, rather than the counts here from before it (which would deny it
    // again until the sync it starts is answered). Nothing is pending or in flight to lose; at most
    // one such call per interval, as for syncs.
    if (
      entry.syncing === undefined &&
      entry.pending === 0 &&
      now - entry.syncedAt >= intervalMs &&
      entry.remaining.some((r) => r === 0) &&
      entry.remaining.every((r, i) => r > 0 || now >= (entry.retryAt[i] as number))
    ) {
      entries.delete(key)
      return undefined
    }
    if (!busy(entry, now) && now - entry.syncedAt >= intervalMs && !idle) void sync(key, entry, now)
    // A sync in flight for longer than the interval: the next one is still about an interval away.
    const next = entry.syncedAt + intervalMs - now
    const wait = next > 0 ? next : intervalMs
    let allowed = true
    for (let i = 0; i < rules; i++) {
      if (cost > (entry.remaining[i] as number) && (shadow & (1 << i)) === 0) allowed = false
    }
    if (allowed && cost > 0) {
      entry.pending += cost
      if (now < entry.closes) entry.early += cost
    }
    return entry.remaining.map((left, i) => {
      const admits = cost <= left
      // A cost above what the rule can ever admit waits for nothing (REFERENCE §1), as the store says.
      const never = cost > (context.rules[i] as StoreRule).compiled.limit
      const charged = allowed && admits && cost > 0
      if (charged) {
        entry.remaining[i] = left - cost
        // What is admitted here counts in a log for a window, and in a fixed window until its end:
        // the last answer's, or, when that one is over (or held nothing), the one `now` is in.
        const { policy } = context.rules[i] as StoreRule
        const resetAt = entry.resetAt[i] as number
        if (policy.algorithm === 'sliding-log') entry.resetAt[i] = Math.max(resetAt, now + policy.windowMs)
        else if (policy.algorithm === 'fixed-window' && resetAt <= now)
          entry.resetAt[i] = now - (now % policy.windowMs) + policy.windowMs
      }
      let resetAfterMs = Math.max(0, (entry.resetAt[i] as number) - now)
      let delayMs = 0
      const s = steps[i]
      if (s !== undefined) {
        // REFERENCE §2 shape: delay = max(0, TAT - now), then TAT = max(TAT, now) + cost·T.
        const at = (now - entry.base) * s.r
        const tat = entry.tat[i] as number
        if (s.shape) delayMs = Math.max(0, Math.ceil((tat - at) / s.r))
        if (charged) entry.tat[i] = Math.max(tat, at) + cost * s.p
        resetAfterMs = Math.max(0, Math.ceil(((entry.tat[i] as number) - at) / s.r))
      }
      return {
        allowed: admits,
        remaining: allowed && admits ? left - cost : left,
        resetAfterMs,
        // The exact wait is known only to the store: the next sync is when it can change; with no
        // sync coming (quota spent, nothing pending), when the store's last answer says one more
        // unit may pass (the window's end; a bucket's next token).
        retryAfterMs: admits
          ? 0
          : never
            ? Number.POSITIVE_INFINITY
            : idle
              ? (entry.retryAt[i] as number) - now
              : wait,
        delayMs: admits ? delayMs : 0,
        reason: admits ? undefined : never ? 'cost-exceeds-limit' : 'limit-exceeded',
      }
    })
  }

  // Eviction goes in batches of a quarter of `maxKeys`, each one pass of one iterator: an iterator
  // walks the holes that deletions leave at the front until the Map rehashes, so one entry per new
  // key would cost O(holes) each time.
  const batch = maxKeys >> 2 || 1
  let holdOff = 0

  /**
   * Makes room for a key: once the map is full, drops the oldest entries that hold nothing the
   * store lacks until a batch is free. An entry with admissions not synced yet is not dropped but
   * synced and moved to the back (it is dropped on a later pass, once they are in the store). When
   * a pass cannot free a batch, the map stays over `maxKeys` and the next pass waits for a batch
   * of new keys, so that a map of pending entries is not walked for every new key.
   */
  function evict(now: number): void {
    if (entries.size < maxKeys || holdOff-- > 0) return
    const target = maxKeys - batch
    let visits = entries.size
    for (const [key, entry] of entries) {
      if (entries.size <= target || visits-- === 0) break
      entries.delete(key)
      const flying = busy(entry, now)
      if (entry.pending > 0 || flying) {
        if (!flying) void sync(key, entry, now)
        entries.set(key, entry)
      }
    }
    holdOff = entries.size > target ? batch : 0
  }

  /** Records the strict verdicts of a first call, which also charged the store. */
  function seed(key: string, verdicts: readonly RuleVerdict[], now: number, shadow: number): void {
    evict(now)
    const entry: Entry = {
      remaining: verdicts.map((v) => v.remaining),
      resetAt: verdicts.map((v) => now + v.resetAfterMs),
      retryAt: verdicts.map((v, i) => now + unitAfter(context.rules[i] as StoreRule, v, 0)),
      tat: verdicts.map(() => 0),
      base: now,
      pending: 0,
      early: 0,
      closes: Number.NEGATIVE_INFINITY,
      closed: Number.POSITIVE_INFINITY,
      flying: [],
      syncedAt: now,
      syncing: undefined,
      answered: 0,
      shadow,
    }
    windowsOf(entry, verdicts, now)
    verdicts.forEach((v, i) => {
      queue(entry, i, v, now, 0)
    })
    entries.set(key, entry)
  }

  // Per key, its first call while in flight: the only one whose verdicts seed the key, unless
  // `reset` forgot it meanwhile (its answer is the state from before the reset).
  const seeding = new Map<string, Promise<StoreAnswer>>()

  const decide: Approximate['decide'] = async (key, cost, now, shadow, call) => {
    let verdicts = counted(key, cost, now, shadow)
    if (verdicts !== undefined) return { verdicts, source: 'approximate' }
    const first = seeding.get(key)
    if (first !== undefined) {
      // A second store call would seed a state without the admissions counted here after the
      // first answer: wait for that answer and decide here (its seed runs first).
      const settled =
        timed ||
        (await within(
          first.catch(() => undefined),
          intervalMs,
        ))
      const answer = settled ? await first.catch(() => FAILED) : undefined
      verdicts = counted(key, cost, now, shadow)
      if (verdicts !== undefined) return { verdicts, source: 'approximate' }
      if (answer === undefined) {
        // No deadline and no answer within an interval (a lost reply, or a stalled store): this
        // request's own call seeds the key instead, and a late answer to that one seeds nothing.
        if (seeding.get(key) === first) seeding.delete(key)
        return decide(key, cost, now, shadow, call)
      }
      // The first call failed: the store just failed for this key, and a call of each waiting
      // request's own would take a deadline more; the rules' fallbacks answer. (After a `reset`,
      // which the answer did not seed: a strict call of its own.)
      return call(answer.source === 'fallback')
    }
    const run = Promise.resolve(call())
    seeding.set(key, run)
    try {
      const answer = await run
      if (answer.source === 'store' && seeding.get(key) === run) seed(key, answer.verdicts, now, shadow)
      return answer
    } finally {
      if (seeding.get(key) === run) seeding.delete(key)
    }
  }

  return {
    decide,
    async flush(now) {
      const work: Promise<boolean>[] = []
      for (const [key, entry] of entries) {
        if (entry.syncing !== undefined) work.push(entry.syncing)
        if (entry.pending > 0) work.push(sync(key, entry, now))
      }
      let answered = 0
      const all = Promise.all(work.map((w) => w.then((sent) => void (sent && answered++))))
      // Without a deadline, no longer than a key's next sync waits for a reply (it may be lost).
      await within(all, timeoutMs ?? GIVE_UP * intervalMs)
      const failed = work.length - answered
      if (failed > 0) {
        throw new EdgelimitError(
          'ERR_EDGELIMIT_STORE',
          `${failed} sync${failed === 1 ? '' : 's'} of approximate counts failed or went unanswered in time; counts not sent stay pending for the next sync, counts sent are not sent again`,
        )
      }
    },
    reset(key) {
      entries.delete(key)
      seeding.delete(key)
    },
    get syncs() {
      return syncs
    },
    get dropped() {
      return dropped
    },
  }
}

/** `approximate` consistency: what a rule's `consistency` holds to count in-process (see `approximate`). */
export interface ApproximateConsistency {
  readonly mode: 'approximate'
  readonly create: typeof createApproximate
}

/**
 * Approximate consistency for a rule on a remote store: `{ consistency: approximate }`. The rule
 * counts in-process and syncs to the store in batches every `syncInterval` (the shortest of the
 * limiter's approximate rules: they sync together; bounded over-admission, far fewer store calls;
 * see docs/resilience.md). An import rather than a string,
 * so that only apps that use it bundle it.
 *
 * @example
 * import { approximate, createLimiter, fixedWindow } from 'edgelimit'
 * createLimiter({ rules: [{ name: 'api', algorithm: fixedWindow({ limit: 1000, window: '1h' }),
 *   consistency: approximate, syncInterval: '250ms' }], store })
 */
export const approximate: ApproximateConsistency = { mode: 'approximate', create: createApproximate }
