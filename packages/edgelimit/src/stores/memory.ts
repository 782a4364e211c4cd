import { type CompiledRule, type LogState, newVerdict, plainVerdict, type Verdict } from '../core/index.js'
import { ConfigError } from '../errors.js'
import { createIssues } from '../validate.js'
import type { BoundRules, EvaluateOptions, RuleVerdict, Store, StoreRule } from './types.js'

/** Options of the in-memory store. */
export interface MemoryStoreOptions {
  /**
   * Most keys kept per limiter; the least recently used key is evicted beyond it (an evicted key
   * starts fresh). Before that, a new key takes the slot of the least recently used key, then of
   * the next one, if their state has run out (at most two per new key, O(1)); an expired key
   * further from the least recently used end stays until it gets there.
   * @default 100_000
   */
  maxKeys?: number
}

/** The in-memory store with its synchronous path. */
export interface MemoryStore extends Store {
  readonly name: 'memory'
  bind(rules: readonly StoreRule[]): MemoryRules
  /**
   * Keys held, over the limiters bound to this store that are still alive: a limiter no longer
   * referenced is collected with its keys (the store holds it weakly).
   */
  readonly size: number
}

/** Rules bound to the memory store: synchronous, plus introspection. */
export interface MemoryRules extends BoundRules {
  evaluateSync(key: string, cost: number, now: number, options?: EvaluateOptions): readonly RuleVerdict[]
  /** Keys currently held. */
  readonly size: number
}

const NONE = -1

/**
 * The embedded default store: per-process, atomic per key (no await between read and write),
 * bounded by `maxKeys` with LRU eviction, expired state reclaimed without timers. Runs unchanged
 * in any JavaScript runtime.
 *
 * State is columnar: a `Map` from key to slot, numeric state in one `Float64Array`, LRU links in
 * an `Int32Array` — about 90 bytes per key, with no object per key.
 *
 * @example
 * const limiter = createLimiter({ rules, store: memoryStore({ maxKeys: 1_000_000 }) })
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const issues = createIssues()
  const maxKeys =
    issues.object('options', options, 'maxKeys') && issues.integer('maxKeys', options.maxKeys ?? 100_000, 1)
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  // Weakly held: a limiter no longer used is collected with its keys (the store outlives it).
  let tables: WeakRef<MemoryRules>[] = []
  return {
    name: 'memory',
    bind(rules) {
      const table = createTable(
        rules.map((r) => r.compiled),
        maxKeys as number,
      )
      tables = tables.filter((t) => t.deref())
      tables.push(new WeakRef(table))
      return table
    },
    get size() {
      return tables.reduce((sum, t) => sum + (t.deref()?.size ?? 0), 0)
    },
  }
}

function createTable(rules: readonly CompiledRule[], maxKeys: number): MemoryRules {
  const count = rules.length
  const offsets: number[] = []
  const logIndex: number[] = []
  let width = 0
  let logs = 0
  for (const rule of rules) {
    offsets.push(width)
    logIndex.push(rule.kind === 'log' ? logs++ : NONE)
    width += rule.width
  }
  const single = count === 1 && rules[0]?.kind === 'numeric' ? rules[0] : undefined
  const outs: Verdict[] = rules.map(() => newVerdict())
  const out0 = outs[0] as Verdict
  const zero = new Float64Array(Math.max(width, 1))

  const index = new Map<string, number>()
  // A first table of 1,024 slots, doubled as keys arrive.
  let capacity = Math.min(1024, maxKeys)
  const keys: string[] = new Array<string>(capacity)
  let rows = new Float64Array(capacity * width)
  /** LRU links, side by side: `links[2s]` = previous (more recent) slot, `links[2s + 1]` = next. */
  let links = new Int32Array(capacity * 2)
  const logStates: (LogState | undefined)[][] = Array.from({ length: logs }, () => [])
  const free: number[] = []
  let used = 0
  let head = NONE
  let tail = NONE

  function unlink(slot: number): void {
    const p = links[2 * slot] as number
    const n = links[2 * slot + 1] as number
    if (p === NONE) head = n
    else links[2 * p + 1] = n
    if (n === NONE) tail = p
    else links[2 * n] = p
  }

  function pushFront(slot: number): void {
    links[2 * slot] = NONE
    links[2 * slot + 1] = head
    if (head !== NONE) links[2 * head] = slot
    head = slot
    if (tail === NONE) tail = slot
  }

  function remove(slot: number): void {
    unlink(slot)
    index.delete(keys[slot] as string)
    keys[slot] = ''
    rows.fill(0, slot * width, (slot + 1) * width)
    for (const states of logStates) states[slot] = undefined
    free.push(slot)
  }

  function expiredAt(slot: number): number {
    let until = 0
    for (let r = 0; r < count; r++) {
      const rule = rules[r] as CompiledRule
      let at = 0
      if (rule.kind === 'numeric') at = rule.expiresAt(rows, slot * width + (offsets[r] as number))
      else {
        const log = logStates[logIndex[r] as number]?.[slot]
        if (log !== undefined) at = rule.expiresAt(log)
      }
      if (at > until) until = at
    }
    return until
  }

  function grow(): void {
    const size = Math.min(capacity * 2, maxKeys)
    const r = new Float64Array(size * width)
    r.set(rows)
    rows = r
    const l = new Int32Array(size * 2)
    l.set(links)
    links = l
    keys.length = size
    capacity = size
  }

  /** A slot for a new key: a freed one, an expired one, a new one, or the evicted LRU key's. */
  function allocate(key: string, now: number): number {
    // Before the table grows (or evicts a live key), expired least-recently-used keys give up
    // their slots: memory follows the live set, at O(1) per decision and without timers, and a
    // table with room left pays nothing for it.
    if (free.length === 0 && used === capacity) {
      for (let i = 0; i < 2 && tail !== NONE && expiredAt(tail) <= now; i++) remove(tail)
    }
    let slot: number
    if (free.length > 0) slot = free.pop() as number
    else if (used < capacity) slot = used++
    else if (capacity < maxKeys) {
      grow()
      slot = used++
    } else {
      remove(tail)
      slot = free.pop() as number
    }
    keys[slot] = key
    index.set(key, slot)
    pushFront(slot)
    return slot
  }

  function decideRule(r: number, slot: number | undefined, now: number, cost: number): Verdict {
    const rule = rules[r] as CompiledRule
    const out = outs[r] as Verdict
    if (rule.kind === 'log') {
      rule.decide(slot === undefined ? undefined : logStates[logIndex[r] as number]?.[slot], now, cost, out)
    } else if (slot === undefined) rule.decide(zero, 0, now, cost, out)
    else rule.decide(rows, slot * width + (offsets[r] as number), now, cost, out)
    return out
  }

  function evaluateSync(
    key: string,
    cost: number,
    now: number,
    options?: EvaluateOptions,
  ): readonly RuleVerdict[] {
    let slot = index.get(key)
    if (slot !== undefined && slot !== head) {
      unlink(slot)
      pushFront(slot)
    }
    const shadow = options?.shadow ?? 0
    const force = options?.force === true
    if (single !== undefined && shadow === 0 && !force) {
      // The common case: one enforced numeric rule, no all-or-nothing bookkeeping.
      const out = out0
      if (slot === undefined) single.decide(zero, 0, now, cost, out)
      else single.decide(rows, slot * width, now, cost, out)
      if (out.allowed && cost > 0) {
        if (slot === undefined) slot = allocate(key, now)
        const base = slot * width
        const next = out.next
        for (let i = 0; i < width; i++) rows[base + i] = next[i] as number
      }
      return outs
    }
    let allowed = true
    for (let r = 0; r < count; r++) {
      if (!decideRule(r, slot, now, cost).allowed && (shadow & (1 << r)) === 0) allowed = false
    }
    if (cost === 0) return outs
    if (!allowed && !force) {
      // Nothing is charged: admitting rules report their state as it stands.
      for (let r = 0; r < count; r++) if ((outs[r] as Verdict).allowed) decideRule(r, slot, now, 0)
      return outs
    }
    if (slot === undefined) slot = allocate(key, now)
    for (let r = 0; r < count; r++) {
      const rule = rules[r] as CompiledRule
      const out = outs[r] as Verdict
      // Admitted (every enforced rule admitted) or forced: a shadow rule is charged only when it admits.
      if (!out.allowed && (shadow >> r) & 1) continue
      if (rule.kind === 'numeric') {
        const base = slot * width + (offsets[r] as number)
        for (let i = 0; i < rule.width; i++) rows[base + i] = out.next[i] as number
      } else {
        const states = logStates[logIndex[r] as number] as (LogState | undefined)[]
        states[slot] = rule.commit(states[slot], now, cost)
      }
    }
    return outs
  }

  return {
    evaluateSync,
    async evaluate(key, cost, now, options) {
      return evaluateSync(key, cost, now, options).map(plainVerdict)
    },
    async reset(key) {
      const slot = index.get(key)
      if (slot !== undefined) remove(slot)
    },
    get size() {
      return index.size
    },
  }
}
