import { DurableObject } from 'cloudflare:workers'
import {
  type AlgorithmFactory,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../algorithms.js'
import { systemClock } from '../../clock.js'
import type { CompiledRule } from '../../core/index.js'
import { EdgelimitError } from '../../errors.js'
import { remember } from '../../remember.js'
import type { RuleVerdict } from '../types.js'
import type { DurableObjectContext, DurableObjectStorageLike } from './platform.js'
import type { EvaluateRequest, ResetRequest, RuleSpec } from './protocol.js'
import {
  type Compilers,
  compileRuleSet,
  parseState,
  type RuleSet,
  type RuleState,
  serializeState,
} from './rule-set.js'

/**
 * Builds the Durable Object class for the algorithms listed — what `EdgelimitDurableObject` is
 * for all six. A Worker that uses fewer ships less code by listing only those (the object refuses
 * a rule set with any other algorithm, with an `ERR_EDGELIMIT_STORE` error naming it).
 *
 * @example
 * // src/index.ts of a Worker that only uses slidingWindow()
 * export const EdgelimitDurableObject = durableObjectClass(slidingWindow)
 */
export function durableObjectClass(...algorithms: readonly AlgorithmFactory<never>[]) {
  const compilers: Compilers = new Map(algorithms.map((a) => [a.definition.name, a.definition.compile]))
  /**
   * The Durable Object that holds rate-limit state and runs the core in-object. Export it from
   * your Worker under the class name bound in wrangler config, as a SQLite-backed class
   * (`new_sqlite_classes` in a migration); `durableObjectStore()` calls it over RPC.
   *
   * Every decision is one synchronous turn: read the key's states from SQLite (on every decision:
   * nothing is cached in memory), decide with the core, write the charged states through
   * `ctx.storage.sql`. No `await` in between, so decisions on one object never interleave, and the
   * output gate releases the answer only once the write is durable. Expired rows are deleted by an
   * alarm, and the object's storage with the last of them. With `clock: 'object'` the object's
   * clock decides; with `'client'`, the caller's.
   *
   * @example
   * // src/index.ts of a Worker
   * export { EdgelimitDurableObject } from 'edgelimit/cloudflare'
   * // wrangler.jsonc
   * // "durable_objects": { "bindings": [{ "name": "RATE_LIMITER", "class_name": "EdgelimitDurableObject" }] },
   * // "migrations": [{ "tag": "v1", "new_sqlite_classes": ["EdgelimitDurableObject"] }]
   */
  return class EdgelimitDurableObject extends DurableObject {
    /**
     * Expired rows are deleted by an alarm at most this often (one alarm per object per period).
     * Override in a subclass to tune: `class Limiter extends EdgelimitDurableObject { static sweepEveryMs = 300_000 }`.
     */
    static sweepEveryMs = 60_000

    readonly #storage: DurableObjectStorageLike
    /** Compiled rule sets by their text, up to 64 (one per limiter that calls this object). */
    readonly #sets = new Map<string, RuleSet>()
    /** When the pending alarm fires (`Infinity`: none is). */
    #alarmAt = Infinity
    /** Whether the table exists: it is created by the first write, and dropped with the last row. */
    #ready: boolean

    constructor(ctx: DurableObjectContext, env: unknown) {
      super(ctx, env)
      this.#storage = ctx.storage
      try {
        this.#ready =
          this.#storage.sql.exec(`SELECT 1 FROM sqlite_master WHERE name = 'edgelimit_state'`).toArray()
            .length > 0
      } catch (error) {
        throw new EdgelimitError(
          'ERR_EDGELIMIT_STORE',
          `EdgelimitDurableObject needs a SQLite-backed class (new_sqlite_classes): ${error}`,
        )
      }
    }

    /** Decides one request for one key, all-or-nothing over the rule set (RPC). */
    evaluate(request: EvaluateRequest): RuleVerdict[] {
      const { key, cost } = request
      const clockNow = systemClock.now()
      const now = request.now ?? clockNow
      if (typeof key !== 'string' || !Number.isSafeInteger(cost) || cost < 0 || !Number.isSafeInteger(now)) {
        throw new EdgelimitError(
          'ERR_EDGELIMIT_STORE',
          'Expected a string key, a non-negative integer cost and time',
        )
      }
      const set = this.#ruleSet(request.rules)
      // Read from SQLite on every decision: the object's database is local and synchronous, and a
      // parsed copy kept in memory would cost more code than the reads it saves.
      const states: (RuleState | undefined)[] = []
      // A fresh object has no table: a peek (cost 0) there leaves it with no storage at all.
      for (const row of this.#ready
        ? this.#storage.sql.exec(`SELECT rule, state FROM edgelimit_state WHERE key = ?`, key)
        : []) {
        // Rows are keyed by `<name>:<fingerprint>` (encodeRules): another policy under the same
        // name, or a changed one, reads none of them and starts fresh.
        const r = set.names.indexOf(row.rule as string)
        if (r >= 0) states[r] = parseState(row.state as string)
      }
      // Filled at the charged rules' places only (forEach skips the others).
      const writes: RuleState[] = []
      const verdicts = set.evaluate(states, cost, now, request.shadow ?? 0, request.force === true, writes)
      if (writes.length) {
        let soonest = Infinity
        // The rows of one decision are written all or none: a write that throws (SQLITE_FULL)
        // rolls back the rows before it and the table it created. The table flag and the alarm
        // live in memory, so they change only once the transaction is done.
        this.#storage.transactionSync(() => {
          if (!this.#ready)
            this.#storage.sql.exec(
              `CREATE TABLE edgelimit_state (key TEXT, rule TEXT, algorithm TEXT, state TEXT, expires INTEGER, PRIMARY KEY (key, rule)) WITHOUT ROWID; CREATE INDEX edgelimit_state_expires ON edgelimit_state (expires)`,
            )
          writes.forEach((state, r) => {
            const rule = set.rules[r] as CompiledRule
            // Expiry in the object's clock, whichever clock decided: the alarm reads the object's clock.
            // When the state equals a fresh key's: a log's `expiresAt` takes the log alone (the offset
            // is ignored); a row's, the row at offset 0.
            const fresh = (rule.expiresAt as (state: RuleState, offset: number) => number)(state, 0)
            const expires = clockNow + Math.max(0, Math.ceil(fresh - now))
            this.#storage.sql.exec(
              `REPLACE INTO edgelimit_state VALUES (?,?,?,?,?)`,
              key,
              set.names[r] as string,
              rule.policy.algorithm,
              serializeState(state),
              expires,
            )
            soonest = Math.min(soonest, expires)
          })
        })
        this.#ready = true
        this.#schedule(soonest, clockNow)
      }
      return verdicts
    }

    /** Forgets `key` for the rules of one rule set (RPC). */
    reset(request: ResetRequest): void {
      // Rows left empty by a reset are dropped by the alarm still pending for them.
      const { names } = this.#ruleSet(request.rules)
      if (this.#ready)
        for (const name of names)
          this.#storage.sql.exec(`DELETE FROM edgelimit_state WHERE key = ? AND rule = ?`, request.key, name)
    }

    /**
     * Deletes expired rows; re-arms for the earliest remaining expiry. With no row left, empties
     * the object's storage: an object with none is not kept (nor billed) by the platform.
     */
    alarm(): void {
      const now = systemClock.now()
      this.#alarmAt = Infinity
      if (!this.#ready) return
      this.#storage.sql.exec(`DELETE FROM edgelimit_state WHERE expires <= ?`, now)
      const next = this.#storage.sql
        .exec(`SELECT MIN(expires) AS next FROM edgelimit_state`)
        .toArray()[0]?.next
      // MIN is null when no row is left.
      if (next !== null) this.#schedule(next as number, now)
      else {
        this.#ready = false
        // Not awaited, as setAlarm: the alarm that runs this is cleared when it returns.
        void this.#storage.deleteAll()
      }
    }

    #ruleSet(text: string): RuleSet {
      let set = this.#sets.get(text)
      if (set === undefined) {
        if (typeof text !== 'string') throw new EdgelimitError('ERR_EDGELIMIT_STORE', 'Expected the rule set')
        set = compileRuleSet(JSON.parse(text) as RuleSpec, compilers)
        remember(this.#sets, text, set, 64)
      }
      return set
    }

    #schedule(expires: number, now: number): void {
      const at = Math.max(expires, now + (this.constructor as typeof EdgelimitDurableObject).sweepEveryMs)
      if (this.#alarmAt <= at) return
      this.#alarmAt = at
      // Not awaited: the output gate holds the answer until the alarm is stored with the write.
      void this.#storage.setAlarm(at)
    }
  }
}

/**
 * The Durable Object that holds rate-limit state, for every algorithm (see `durableObjectClass`
 * to list fewer). Export it from your Worker under the class name bound in wrangler config.
 */
export const EdgelimitDurableObject = /* @__PURE__ */ durableObjectClass(
  fixedWindow,
  slidingLog,
  slidingWindow,
  tokenBucket,
  leakyBucket,
  gcra,
)
/** An instance of `EdgelimitDurableObject` (for `DurableObjectNamespace<EdgelimitDurableObject>`). */
export type EdgelimitDurableObject = InstanceType<typeof EdgelimitDurableObject>
