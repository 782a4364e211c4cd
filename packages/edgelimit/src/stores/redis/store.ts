import { ConfigError, EdgelimitError } from '../../errors.js'
import { within } from '../../resilience/deadline.js'
import { remoteDecider } from '../../resilience/remote.js'
import { createIssues } from '../../validate.js'
import { fingerprint } from '../fingerprint.js'
import type { BoundRules, EvaluateOptions, RuleVerdict, Store, StoreRule } from '../types.js'
import { type ScriptClient, toScriptClient } from './clients.js'
import { compileScript } from './script.js'
import { keySlot } from './slot.js'

/** Options of the Redis store. */
export interface RedisStoreOptions {
  /**
   * An ioredis `Redis` or `Cluster`, a node-redis client or cluster, or an `@upstash/redis` client.
   * Clients are optional peer dependencies: install the one you use. An ioredis `Cluster`'s
   * `keyPrefix` must not have braces (it comes before the hash tag of every key).
   */
  client: unknown
  /**
   * Prepended to every key: `<prefix>:<rule>:<fingerprint>:{<key>}` (`%` and `:` in the rule name
   * escaped; the fingerprint identifies the rule's policy). @default 'edgelimit'
   */
  prefix?: string
  /**
   * Whose clock decides: `'server'` uses Redis `TIME` inside the script (no skew between edge
   * locations); `'client'` passes the limiter's clock (manual clocks in tests, managed Redis that
   * forbids `TIME` in scripts). @default 'server'
   */
  clock?: 'server' | 'client'
  /**
   * Coalescing: the decisions a limiter issues in the same event-loop tick travel as one `EVALSHA`
   * (per Cluster slot), decided one after another inside the script exactly as if each had been
   * sent alone. On ioredis, a decision issued with nothing in flight leaves at once, and those
   * issued while it travels coalesce. At most one Redis command per decision; concurrent
   * decisions share one. `false` sends every decision as its own command. @default true
   */
  coalesce?: boolean
  /**
   * The most decisions one coalesced `EVALSHA` carries. Where the store writes each command as
   * it is issued (ioredis, with or without `enableAutoPipelining`: the store's own calls skip
   * ioredis's auto-pipelining queue), small batches let the client decode one reply while Redis
   * runs the next batch; where the client sends a tick's commands together (node-redis) or pays
   * an HTTP request per command (Upstash), fewer, larger batches win (bench:redis;
   * docs/stores/redis.md).
   * @default 8 for ioredis, else 64
   */
  maxBatch?: number
}

/** How long a slot seen being migrated gets one command per decision before batches are tried again. */
const MOVING_MS = 1000

const REASONS = [undefined, 'limit-exceeded', 'cost-exceeds-limit'] as const

/**
 * Runs `f` once the current tick's promise jobs have run (Node, Bun, Deno), else on a new task.
 * process.nextTick is called as it is, without a wrapper (it does not read `this`).
 */
const nextTick = (globalThis as { process?: { nextTick?: (f: () => void) => void } }).process?.nextTick
const afterTick: (f: () => void) => void =
  typeof nextTick === 'function' ? nextTick : (f) => void setTimeout(f, 0)

/**
 * A store in Redis: every decision is decided by one script that evaluates all of a limiter's
 * rules for a key atomically (all-or-nothing), with a TTL on every write. Decisions issued in the
 * same tick share one `EVALSHA` (see `coalesce`), so there is at most one Redis command per
 * decision. Keys are `<prefix>:<rule>:<fingerprint>:{<key>}`, with `%` and `:` in the rule name
 * escaped (`%25`, `%3A`) and the fingerprint of the rule's policy (a rule whose policy changes
 * starts fresh; see `fingerprint`): one hash tag per client key, so a client's rules share a
 * Cluster slot and clients spread across the cluster. A script missing on the server
 * (restart, failover, `SCRIPT FLUSH`) is sent once with `EVAL`, which loads it on that node; a
 * batch that a Cluster slot being migrated refuses is sent again one decision per command; any
 * other error is an error.
 *
 * @throws {ConfigError} listing every invalid option (and, when a limiter binds it, every rule
 * name with a brace).
 * @example
 * import Redis from 'ioredis'
 * import { redisStore } from 'edgelimit/redis'
 * const limiter = createLimiter({ rules, store: redisStore({ client: new Redis() }) })
 */
export function redisStore(options: RedisStoreOptions): Store {
  const issues = createIssues()
  let client: ScriptClient | undefined
  if (issues.object('options', options, 'client prefix clock coalesce maxBatch')) {
    const { prefix, clock, coalesce, maxBatch } = options
    client = toScriptClient(options.client)
    issues.expect(
      'client',
      options.client,
      client !== undefined,
      'ERR_CLIENT',
      'an ioredis, node-redis or @upstash/redis client',
    )
    issues.expect(
      'prefix',
      prefix,
      prefix === undefined || (typeof prefix === 'string' && !/[{}]/.test(prefix)),
      'ERR_PREFIX',
      'a string without braces (they would move the Cluster hash tag)',
    )
    // ioredis writes its keyPrefix before every key: on a Cluster a brace in it would move the hash
    // tag ('app{' splits a client's keys across slots; '{app}:' puts every key in one slot).
    if (client?.cluster === true && client.keyPrefix !== undefined)
      issues.expect(
        'client.options.keyPrefix',
        client.keyPrefix,
        typeof client.keyPrefix !== 'string' || !/[{}]/.test(client.keyPrefix),
        'ERR_KEY_PREFIX',
        'a key prefix without braces on a Cluster (they would move the hash tag)',
      )
    if (clock !== undefined) issues.oneOf('clock', clock, ['server', 'client'])
    issues.boolean('coalesce', coalesce)
    if (maxBatch !== undefined) issues.integer('maxBatch', maxBatch, 1, Number.MAX_SAFE_INTEGER)
  }
  if (client === undefined || issues.list.length > 0) throw new ConfigError(issues.list)
  const prefix = options.prefix ?? 'edgelimit'
  const coalesce = options.coalesce ?? true
  const maxBatch = options.maxBatch ?? (client.pipelined ? 64 : 8)
  const settings = {
    clientClock: options.clock === 'client',
    maxBatch: coalesce ? maxBatch : 1,
    // Where each command is written as it is issued, a decision with nothing in flight leaves at
    // once; a client that sends a tick's commands together (or one HTTP request each) would only
    // pay a command more for it.
    eager: !client.pipelined,
  }
  return {
    name: 'redis',
    bind: (rules) => bindRules(client, prefix, settings, rules),
    decider: remoteDecider,
  }
}

/** Decisions on their way in one script call. */
interface Batch {
  /** The Cluster slot of its keys, or -1. */
  readonly slot: number
  readonly keys: string[]
  /** ARGV: the clock mode, the rules' params, then each decision's time (client clock) and cost. */
  readonly args: string[]
  readonly resolve: ((verdicts: RuleVerdict[]) => void)[]
  readonly reject: ((error: unknown) => void)[]
}

/** The batches sent between two resets: how many are in flight, and who waits for none. */
interface Generation {
  left: number
  done: (() => void) | undefined
}

function bindRules(
  client: ScriptClient,
  prefix: string,
  settings: { clientClock: boolean; maxBatch: number; eager: boolean },
  rules: readonly StoreRule[],
): BoundRules {
  // A brace in a rule name would move the hash tag and split a client's keys across slots. The
  // limiter binds all its rules first, in order, so `i` is the rule's index in its options.
  const issues = createIssues()
  rules.forEach((rule, i) => {
    issues.expect(
      `rules[${i}].name`,
      rule.name,
      !/[{}]/.test(rule.name),
      'ERR_RULE_NAME',
      'a rule name without braces on Redis (they would move the Cluster hash tag)',
    )
  })
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  const { clientClock, maxBatch, eager } = settings
  const count = rules.length
  const script = compileScript(rules.map((r) => r.policy))
  const header = [clientClock ? 'c' : '', ...script.params]
  // `%` and `:` escaped in the rule name, so that a prefix with colons (`myapp:rl`) and the rule
  // name split one way: prefix `api` + rule `v2:login` and prefix `api:v2` + rule `login` are two keys.
  // The policy's fingerprint after it: limiters that reuse a name with another policy, and a deploy
  // that changes a rule, keep (or start) a state of their own (docs/decisions/0014-state-identity.md).
  const heads = rules.map(
    (r) => `${prefix}:${r.name.replace(/[%:]/g, encodeURIComponent)}:${fingerprint(r.policy)}:{`,
  )
  let sha: string | undefined
  let hashing: Promise<string> | undefined
  // Decisions of this tick not sent yet: one batch, or one per Cluster slot.
  let open: Batch | undefined
  const openBySlot = new Map<number, Batch>()
  let scheduled = false
  // Batches in flight, counted per generation: `reset` starts a new one and waits until every
  // batch sent before it (its generation and, through `drained`, the earlier ones) has settled.
  // A count, not a set of promises: adding to and deleting from a set per batch costs more.
  let generation: Generation = { left: 0, done: undefined }
  // Batches in flight, of every generation. With none (and `eager`), a decision leaves at once:
  // there is nothing to wait for, and the decisions issued while it travels coalesce.
  let inFlight = 0
  let drained: Promise<unknown> = Promise.resolve()
  // While a reset waits to send its DEL (and, where commands may run out of order, for its answer),
  // the decisions and resets issued after it wait here, in order: they run after it, as issued.
  // Each gives the call it started once released (what the reset then waits for).
  let held: (() => Promise<unknown>)[] | undefined
  // Cluster slots seen being migrated, and until when (the limiter's clock) their decisions are
  // sent one per command: Redis refuses a batch of keys not all on one node, and ioredis takes
  // longer than a limiter's deadline to give up on it (it retries TRYAGAIN, ASK and MOVED).
  const moving = new Map<number, number>()
  // The latest decision's time: when a refused batch comes back (ioredis: after its retries).
  let latest = 0

  /** The script's reply, the script loaded first when this process has not hashed it yet. */
  async function run(keys: string[], args: string[]): Promise<unknown> {
    if (sha === undefined) {
      hashing ??= sha1(script.text)
      sha = await hashing
    }
    try {
      return await client.evalsha(sha, keys, args)
    } catch (error) {
      if (!isNoScript(error)) throw error
      return recover(keys, args)
    }
  }

  /**
   * After NOSCRIPT: the script did not run, so sending it again cannot charge anything twice. Each
   * command that meets it sends the script itself (EVAL, which loads it on that node) rather than
   * waiting for another's reload: on Workers a store call belongs to the request that made it, and
   * one cancelled with its request (answered at its deadline) would hold the calls waiting on it
   * for ever. Async, so that a client that throws instead of rejecting fails its decisions too.
   */
  async function recover(keys: string[], args: string[]): Promise<unknown> {
    return client.eval(script.text, keys, args)
  }

  /** Sends a batch, counted in `gen`: the generation of the decisions it carries. */
  function send(batch: Batch, gen = generation): void {
    const { keys, args } = batch
    gen.left++
    inFlight++
    const finish = (reply: unknown) => {
      inFlight--
      if (--gen.left === 0) gen.done?.()
      settle(batch, reply)
    }
    const abort = (error: unknown) => {
      // A slot being migrated refuses a batch whose keys are not all on the node, where each
      // decision alone may pass: the script did not run, so each is resent alone (counted before
      // this batch is, so that a reset still waits for them).
      if (batch.resolve.length > 1 && isRedirection(error)) {
        if (batch.slot >= 0) moving.set(batch.slot, latest + MOVING_MS)
        for (const one of split(batch)) send(one, gen)
      } else {
        const failure = storeError(error)
        for (const reject of batch.reject) reject(failure)
      }
      inFlight--
      if (--gen.left === 0) gen.done?.()
    }
    // Once the script is hashed, EVALSHA goes out with no async frame around it (the common case);
    // NOSCRIPT is then recovered in the rejection handler.
    const direct = sha !== undefined
    let reply: Promise<unknown>
    try {
      reply = direct ? client.evalsha(sha as string, keys, args) : run(keys, args)
    } catch (error) {
      reply = Promise.reject(error)
    }
    reply.then(finish, (error: unknown) =>
      direct && isNoScript(error) ? recover(keys, args).then(finish, abort) : abort(error),
    )
  }

  /** A batch's decisions, one batch each. */
  function split(batch: Batch): Batch[] {
    const width = clientClock ? 2 : 1
    return batch.resolve.map((resolve, d) => {
      const at = header.length + d * width
      return {
        slot: batch.slot,
        keys: batch.keys.slice(d * count, d * count + count),
        args: [...header, ...batch.args.slice(at, at + width)],
        resolve: [resolve],
        reject: [batch.reject[d] as (error: unknown) => void],
      }
    })
  }

  function flush(): void {
    scheduled = false
    if (open !== undefined) {
      const batch = open
      open = undefined
      send(batch)
    }
    if (openBySlot.size > 0) {
      const batches = [...openBySlot.values()]
      openBySlot.clear()
      for (const batch of batches) send(batch)
    }
  }

  function settle(batch: Batch, raw: unknown): void {
    const decisions = batch.resolve.length
    const width = count * 4
    if (!Array.isArray(raw) || raw.length !== decisions * width) {
      const error = unexpected(raw)
      for (const reject of batch.reject) reject(error)
      return
    }
    for (let d = 0, o = 0; d < decisions; d++, o += width) {
      const verdicts = Number(raw[o]) === -1 ? undefined : decode(raw, o, count)
      if (verdicts !== undefined) (batch.resolve[d] as (v: RuleVerdict[]) => void)(verdicts)
      else {
        ;(batch.reject[d] as (e: unknown) => void)(
          Number(raw[o]) === -1
            ? new EdgelimitError(
                'ERR_EDGELIMIT_STORE',
                `Redis could not read or write the state: ${String(raw[o + 1])}`,
              )
            : unexpected(raw.slice(o, o + width)),
        )
      }
    }
  }

  const newBatch = (slot: number): Batch => ({
    slot,
    keys: [],
    args: header.slice(),
    resolve: [],
    reject: [],
  })

  /** Whether a decision on `slot` at `now` goes alone: no coalescing, or a slot being migrated. */
  function alone(slot: number, now: number): boolean {
    if (maxBatch === 1) return true
    if (moving.size === 0) return false
    const until = moving.get(slot)
    if (until === undefined) return false
    if (until > now) return true
    moving.delete(slot)
    return false
  }

  function batchFor(slot: number): Batch {
    if (slot < 0) {
      open ??= newBatch(-1)
      return open
    }
    let batch = openBySlot.get(slot)
    if (batch === undefined) {
      batch = newBatch(slot)
      openBySlot.set(slot, batch)
    }
    return batch
  }

  /** Adds a decision to its batch, which leaves now or at the end of the tick. */
  function enqueue(
    key: string,
    cost: number,
    now: number,
    options: EvaluateOptions | undefined,
    resolve: (verdicts: RuleVerdict[]) => void,
    reject: (error: unknown) => void,
  ): void {
    const tag = escapeTag(key)
    const slot = client.cluster ? keySlot(tag) : -1
    const solo = alone(slot, now)
    const batch = solo ? newBatch(slot) : batchFor(slot)
    if (now > latest) latest = now
    for (const head of heads) batch.keys.push(`${head}${tag}}`)
    if (clientClock) batch.args.push(String(now))
    batch.args.push(costSpec(cost, options, count))
    batch.resolve.push(resolve)
    batch.reject.push(reject)
    if (solo || batch.resolve.length >= maxBatch || (eager && inFlight === 0)) {
      // Alone, full, or nothing in flight (`eager`): it leaves now; later decisions of this
      // tick open a new one.
      if (batch === open) open = undefined
      else if (openBySlot.get(slot) === batch) openBySlot.delete(slot)
      send(batch)
    } else if (!scheduled) {
      scheduled = true
      afterTick(flush)
    }
  }

  /**
   * Runs what waited behind the reset that held `list`, in order, until a reset among it holds the
   * rest; returns the calls it started (a reset among them stands for those it holds in turn).
   */
  function release(list: (() => Promise<unknown>)[]): Promise<unknown>[] {
    const started: Promise<unknown>[] = []
    if (held !== list) return started
    held = undefined
    for (let i = 0; i < list.length; i++) {
      started.push((list[i] as () => Promise<unknown>)())
      // A reset among them holds what follows it in turn (the call may have set `held`).
      const next = held as (() => Promise<unknown>)[] | undefined
      if (next !== undefined) {
        next.push(...list.slice(i + 1))
        break
      }
    }
    return started
  }

  /**
   * Decisions issued before the reset are decided before it, as if they had been sent alone, or
   * abandoned by their callers at the limiter's deadline: a request that never answers (a REST
   * client without a timeout) holds a reset no longer than `waitMs`. Those issued after it are
   * decided after it: they wait until its DEL is on the connection (where commands run in the order
   * issued; else until it has answered). With nothing in flight on such a connection, the DEL
   * leaves at once and nothing waits.
   */
  async function resetNow(key: string, waitMs: number | undefined): Promise<void> {
    flush()
    const barrier: (() => Promise<unknown>)[] | undefined = client.ordered && inFlight === 0 ? undefined : []
    if (barrier !== undefined) held = barrier
    let released: Promise<unknown>[] = []
    // When the time for its DEL and for the calls it released is up: one deadline for both.
    let until = Number.POSITIVE_INFINITY
    try {
      if (inFlight > 0) {
        const gen = generation
        if (gen.left > 0) {
          generation = { left: 0, done: undefined }
          const own = new Promise<void>((resolve) => {
            gen.done = resolve
          })
          drained = Promise.all([drained, own])
        }
        const waited = drained
        if (waitMs === undefined) await waited
        else if (!(await within(waited, waitMs)) && drained === waited) {
          // Every batch sent before it is decided or abandoned: later resets need not wait for them.
          drained = Promise.resolve()
        }
      }
      // The DEL itself answers in the same time, or the reset fails with a code (the client's own
      // error, without one, is its cause): a reset that may or may not have happened is an error.
      let failure: { error: unknown } | undefined
      const fail = (error: unknown) => {
        failure = { error }
      }
      let deleted: Promise<void>
      if (waitMs !== undefined) until = performance.now() + waitMs
      try {
        deleted = client.del(heads.map((h) => `${h}${escapeTag(key)}}`)).then(() => undefined, fail)
      } catch (error) {
        fail(error)
        deleted = Promise.resolve()
      }
      // The DEL is on the connection: what was issued after the reset follows it there.
      if (barrier !== undefined && client.ordered) released = release(barrier)
      if (waitMs === undefined) await deleted
      else if (!(await within(deleted, waitMs)))
        throw new EdgelimitError(
          'ERR_EDGELIMIT_TIMEOUT',
          `reset: the store did not answer within ${waitMs} ms`,
        )
      if (failure !== undefined) {
        const cause = failure.error
        throw Object.assign(new EdgelimitError('ERR_EDGELIMIT_STORE', `reset failed: ${messageOf(cause)}`), {
          cause,
        })
      }
    } finally {
      // Answered, failed or timed out: nothing issued after it waits any longer.
      if (barrier !== undefined) {
        released.push(...release(barrier))
        // The calls it held were sent from here, and on Workers a store call belongs to the request
        // that sent it, cancelled when that request ends (this reset's caller answering): the reset
        // answers once they have (their own outcome is theirs), by the deadline of its DEL.
        if (released.length > 0) {
          const settled = Promise.allSettled(released)
          await (waitMs === undefined ? settled : within(settled, Math.max(0, until - performance.now())))
        }
      }
    }
  }

  return {
    evaluate(key, cost, now, options) {
      const decision = new Promise<RuleVerdict[]>((resolve, reject) => {
        if (held === undefined) enqueue(key, cost, now, options, resolve, reject)
        else
          held.push(() => {
            enqueue(key, cost, now, options, resolve, reject)
            return decision
          })
      })
      return decision
    },
    reset(key, waitMs) {
      if (held === undefined) return resetNow(key, waitMs)
      // Behind a reset that has not sent its DEL yet: this one starts once that one has.
      const list = held
      return new Promise<void>((resolve, reject) => {
        list.push(() => resetNow(key, waitMs).then(resolve, reject))
      })
    },
  }
}

/** A decision's cost as main.lua reads it: '<cost>', or '<cost>,<force>,<shadow flags>'. */
function costSpec(cost: number, options: EvaluateOptions | undefined, count: number): string {
  const shadow = options?.shadow ?? 0
  const force = options?.force === true
  if (shadow === 0 && !force) return cost === 1 ? '1' : String(cost)
  let flags = ''
  if (shadow !== 0) for (let i = 0; i < count; i++) flags += (shadow & (1 << i)) === 0 ? '0' : '1'
  return `${cost},${force ? 1 : 0},${flags}`
}

const SURROGATE = /[\uD800-\uDFFF]/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/**
 * A client key inside `{…}`: `}` and `%` escaped so the tag is always the whole key, and never
 * empty. An empty tag would make Redis hash each whole key, putting a key's rules on different
 * Cluster slots (CROSSSLOT), so '' is a bare `%`, which no other key escapes to (a real `%` is
 * always `%25`). A lone UTF-16 surrogate, which UTF-8 would turn into U+FFFD (making several keys
 * one), becomes `%` and its code unit in hex (`%D800`; never `%25` or `%7D`).
 */
function escapeTag(key: string): string {
  if (key === '') return '%'
  const tag = key.includes('}') || key.includes('%') ? key.replace(/%/g, '%25').replace(/}/g, '%7D') : key
  return SURROGATE.test(tag)
    ? tag.replace(LONE_SURROGATE, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    : tag
}

/**
 * Redis's NOSCRIPT reply: the message starts with it (ioredis, node-redis, @upstash/redis without
 * auto-pipelining) or follows @upstash/redis's `Command failed: `. Only there: @upstash/redis
 * appends the request body (client keys included) to other errors' messages.
 */
function isNoScript(error: unknown): boolean {
  return error instanceof Error && /^(?:Command failed: )?NOSCRIPT\b/.test(error.message)
}

/**
 * A Cluster redirection that the client gave up on: the command ran nowhere. node-redis answers
 * TRYAGAIN (a multi-key command on a slot being migrated, its keys not all on the node) at once;
 * ioredis retries it (`retryDelayOnTryAgain`) and the ASK and MOVED that follow, then fails with
 * `Too many Cluster redirections. Last error: ReplyError: <the last of them>`.
 */
function isRedirection(error: unknown): boolean {
  return (
    error instanceof Error &&
    /^(?:Too many Cluster redirections\. Last error: ReplyError: )?(?:TRYAGAIN|ASK|MOVED) /.test(
      error.message,
    )
  )
}

/**
 * A client error's message for the store's own error. @upstash/redis appends the request body to
 * its messages (`, command was: [...]`), client keys included: that goes (on the decision path and
 * in `reset` alike; the client's error, as the `cause`, keeps it).
 */
function messageOf(cause: unknown): string {
  const message = cause instanceof Error ? cause.message || cause.name : String(cause)
  return message.replace(/, command was: [\s\S]*$/, '')
}

/**
 * A client's error on the decision path as the store's (`ERR_EDGELIMIT_STORE`, the client's error
 * its `cause`), as the Durable Object store and `reset` report theirs.
 */
function storeError(cause: unknown): EdgelimitError {
  if (cause instanceof EdgelimitError) return cause
  return Object.assign(new EdgelimitError('ERR_EDGELIMIT_STORE', messageOf(cause)), { cause })
}

const unexpected = (raw: unknown) =>
  new EdgelimitError(
    'ERR_EDGELIMIT_STORE',
    `Unexpected reply from the rate-limit script: ${JSON.stringify(raw)}`,
  )

/** A reply's integer: a number, or a numeric string (from some REST bridges); else NaN. */
const num = (v: unknown): number =>
  typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : Number.NaN

/**
 * One decision's verdicts from the reply at offset `o`: code, remaining, reset, retry/delay; or
 * undefined when they are not (a proxy's or a bridge's reply): a store error, not a verdict.
 * The script sends integers from 0 to 2^53 - 1, and -1 (never) as the retry of a cost above the
 * limit only: any other number (negative, fractional, huge, not finite) is not its reply.
 */
function decode(n: unknown[], o: number, count: number): RuleVerdict[] | undefined {
  const out: RuleVerdict[] = []
  for (let i = 0; i < count; i++, o += 4) {
    const code = num(n[o])
    const remaining = num(n[o + 1])
    const resetAfterMs = num(n[o + 2])
    const x = num(n[o + 3])
    if (REASONS[code] === undefined && code !== 0) return undefined
    if (!(remaining >= 0 && resetAfterMs >= 0 && (x >= 0 || (x === -1 && code === 2)))) return undefined
    if (!Number.isSafeInteger(remaining) || !Number.isSafeInteger(resetAfterMs) || !Number.isSafeInteger(x))
      return undefined
    out.push({
      allowed: code === 0,
      remaining,
      resetAfterMs,
      retryAfterMs: code === 0 ? 0 : x < 0 ? Number.POSITIVE_INFINITY : x,
      delayMs: code === 0 ? x : 0,
      reason: REASONS[code],
    })
  }
  return out
}

/** Hex SHA-1 of the script via Web Crypto (Node 20+, Workers, Deno, Bun). */
async function sha1(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-1', new TextEncoder().encode(text))
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('')
}
