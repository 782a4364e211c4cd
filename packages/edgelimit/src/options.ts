import { type AlgorithmSpec, toPolicy } from './algorithms.js'
import type { Clock } from './clock.js'
import type { Duration } from './duration.js'
import { ConfigError, describe } from './errors.js'
import type { EventSink } from './events.js'
import type { ApproximateConsistency } from './resilience/approximate.js'
import type { BreakerConfig, BreakerOptions } from './resilience/breaker.js'
import type { Store, StoreRule } from './stores/types.js'
import { createIssues } from './validate.js'

/** What a rule does when the store fails or times out. There is a default, and it is stated: `closed`. */
export type StoreErrorMode = 'open' | 'closed' | 'local'

/** Where a rule's counts live, as validated. */
export type ConsistencyMode = 'strict' | 'local' | 'approximate'

/**
 * What `Rule.consistency` takes: `'strict'`, `'local'`, or `approximate` (imported from
 * `edgelimit`: it brings the in-process counting, so apps without it do not bundle it).
 */
export type Consistency = 'strict' | 'local' | ApproximateConsistency

/** A named rule: one algorithm applied to every key of the limiter. */
export interface Rule {
  /** Unique within the limiter; printable ASCII (it appears in headers and store keys). */
  name: string
  algorithm: AlgorithmSpec
  /**
   * When the store fails or misses the deadline: `open` admits (and reports the fault), `closed`
   * denies with reason `store-unavailable` (HTTP 503), `local` decides with an in-process limiter
   * of the same policy until the store is back. @default 'closed'
   */
  onStoreError?: StoreErrorMode
  /** `shadow`: decide, count and report "would block", never block. @default 'enforce' */
  mode?: 'enforce' | 'shadow'
  /** Share of keys (0–100, by a stable hash of the key) the rule is enforced for; the rest are in shadow. @default 100 */
  enforce?: number
  /**
   * `strict`: every decision atomic in the store. `local`: in-process only, per node (coarse DDoS
   * filtering in front of the store). `approximate` (imported from `edgelimit`): count
   * in-process, sync to the store in batches every `syncInterval` (bounded over-admission, far
   * fewer store calls).
   * Rules on the in-process memory store are always strict. @default 'strict'
   */
  consistency?: Consistency
  /**
   * How often `approximate` rules sync their counts; on a strict or local rule it is refused
   * (`ERR_SYNC_INTERVAL`), not ignored. A limiter syncs all its approximate rules
   * together (one store call per key), at the shortest `syncInterval` among them: a `'1s'` rule
   * next to a `'50ms'` one syncs every 50 ms. Give a rule a longer interval in a limiter of its
   * own. @default '250ms'
   */
  syncInterval?: Duration
}

/** Options of `createLimiter`. */
export interface LimiterOptions {
  /** One or more rules; a request is admitted only if every enforced rule admits it. */
  rules: readonly Rule[]
  /** @default memoryStore() */
  store?: Store
  /** @default the system clock */
  clock?: Clock
  /** Decision deadline for a remote store: a call never waits longer. `false`: no deadline. @default '45ms' */
  timeout?: Duration | false
  /** Circuit breaker in front of a remote store. `false` to disable. @default {} */
  breaker?: BreakerOptions | false
  /** In-process cache of denials from a remote store (answered until their retry time). @default { maxKeys: 10_000 } */
  denyCache?: { maxKeys?: number } | false
  /**
   * Called for every decision, shadow denial, store error, fallback and breaker change; one
   * function or several. `meterSink(meter)` turns events into OpenTelemetry instruments.
   * @example onEvent: [(e) => log(e), meterSink(metrics.getMeter('edgelimit'))]
   */
  onEvent?: EventSink | readonly EventSink[]
}

/** A rule as validated: its policy plus its resilience settings. */
export interface RuleConfig extends StoreRule {
  readonly onStoreError: StoreErrorMode
  readonly shadow: boolean
  readonly enforce: number
  readonly consistency: ConsistencyMode
  /** The approximate counter, for `approximate` rules. */
  readonly approximate: ApproximateConsistency | undefined
  readonly syncIntervalMs: number
}

/** Validated limiter-wide settings. */
export interface LimiterConfig {
  readonly rules: readonly RuleConfig[]
  readonly timeoutMs: number | undefined
  readonly breaker: BreakerConfig | undefined
  readonly denyCacheKeys: number
}

/** Validates limiter options once, reporting every problem with its path and code. */
export function validateOptions(options: LimiterOptions): LimiterConfig {
  const issues = createIssues()
  const rules: RuleConfig[] = []
  if (!issues.object('options', options, 'rules store clock timeout breaker denyCache onEvent'))
    throw new ConfigError(issues.list)
  const list = options.rules as unknown
  if (!Array.isArray(list) || list.length === 0) {
    issues.add('rules', 'ERR_EMPTY_RULES', `expected a non-empty array of rules, got ${describe(list)}`)
  } else if (list.length > 30) {
    issues.add('rules', 'ERR_TOO_MANY_RULES', `expected at most 30 rules, got ${list.length}`)
  } else {
    const seen = new Set<string>()
    list.forEach((rule: unknown, i) => {
      const path = `rules[${i}]`
      if (!issues.object(path, rule, 'name algorithm onStoreError mode enforce consistency syncInterval'))
        return
      const name = rule.name
      if (typeof name !== 'string' || !/^[\x21-\x7e]{1,64}$/.test(name)) {
        issues.add(
          `${path}.name`,
          'ERR_RULE_NAME',
          `expected 1–64 printable ASCII characters without spaces, got ${describe(name)}`,
        )
      } else if (seen.has(name)) {
        issues.add(`${path}.name`, 'ERR_DUPLICATE_RULE', `rule name "${name}" is used twice`)
      } else seen.add(name)
      const algorithm = toPolicy(rule.algorithm, `${path}.algorithm`, issues)
      const onStoreError = issues.oneOf(`${path}.onStoreError`, rule.onStoreError ?? 'closed', [
        'open',
        'closed',
        'local',
      ] as const)
      const mode = issues.oneOf(`${path}.mode`, rule.mode ?? 'enforce', ['enforce', 'shadow'] as const)
      const enforce = rule.enforce ?? 100
      issues.expect(
        `${path}.enforce`,
        enforce,
        typeof enforce === 'number' && enforce >= 0 && enforce <= 100,
        'ERR_PERCENT',
        'a percentage from 0 to 100',
      )
      const c = (rule.consistency ?? 'strict') as Partial<ApproximateConsistency> | string | null
      const approximate =
        typeof c === 'object' && c?.mode === 'approximate' && typeof c.create === 'function'
          ? (c as ApproximateConsistency)
          : undefined
      const consistency = approximate ? 'approximate' : c === 'strict' || c === 'local' ? c : undefined
      issues.expect(
        `${path}.consistency`,
        c,
        consistency !== undefined,
        'ERR_CHOICE',
        `"strict", "local" or approximate (imported from edgelimit)`,
      )
      // Only approximate rules sync: on a strict or local one (`c`, a string, is then the
      // consistency) an interval would be silently ignored.
      const syncIntervalMs =
        rule.syncInterval !== undefined && c === consistency
          ? issues.add(
              `${path}.syncInterval`,
              'ERR_SYNC_INTERVAL',
              'needs consistency: approximate (imported from edgelimit), or drop it',
            )
          : issues.duration(`${path}.syncInterval`, rule.syncInterval ?? 250)
      // Every other option missing here was reported, and the options are then refused whole.
      if (algorithm !== undefined) {
        rules.push({
          name: name as string,
          ...algorithm,
          onStoreError: onStoreError as StoreErrorMode,
          shadow: mode === 'shadow',
          enforce: enforce as number,
          consistency: consistency as ConsistencyMode,
          approximate,
          syncIntervalMs: syncIntervalMs as number,
        })
      }
    })
  }
  issues.having('clock', options.clock, 'now', 'ERR_CLOCK', 'an object with a now() method')
  issues.having('store', options.store, 'bind', 'ERR_STORE', 'a store such as memoryStore()')
  const timeoutMs = options.timeout === false ? undefined : issues.duration('timeout', options.timeout ?? 45)
  const b = options.breaker ?? {}
  let breaker: BreakerConfig | undefined
  if (b !== false && issues.object('breaker', b, 'failureRatio sampleSize minimumCalls openMs')) {
    const failureRatio = b.failureRatio ?? 0.5
    issues.expect(
      'breaker.failureRatio',
      failureRatio,
      typeof failureRatio === 'number' && failureRatio > 0 && failureRatio <= 1,
      'ERR_RATIO',
      'a number above 0, at most 1',
    )
    const sampleSize = issues.integer('breaker.sampleSize', b.sampleSize ?? 20, 1, 10_000)
    // A minimum above the sample would never be reached: the breaker could never open.
    const minimumCalls = issues.integer(
      'breaker.minimumCalls',
      b.minimumCalls ?? Math.min(10, sampleSize ?? 10),
      1,
      sampleSize,
    )
    const openMs = issues.duration('breaker.openMs', b.openMs ?? 1000)
    // As for rules: were any of them missing, the options are refused whole.
    breaker = { failureRatio, sampleSize, minimumCalls, openMs } as BreakerConfig
  }
  const denyCache = options.denyCache ?? {}
  const denyCacheKeys =
    denyCache === false
      ? 0
      : issues.object('denyCache', denyCache, 'maxKeys') &&
        issues.integer('denyCache.maxKeys', denyCache.maxKeys ?? 10_000, 0, 10_000_000)
  const sinks: unknown = options.onEvent
  if (!Array.isArray(sinks)) issues.function('onEvent', sinks)
  else
    sinks.forEach((sink, i) => {
      issues.expect(`onEvent[${i}]`, sink, typeof sink === 'function', 'ERR_FUNCTION', 'a function')
    })
  if (issues.list.length > 0) throw new ConfigError(issues.list)
  return { rules, timeoutMs, breaker, denyCacheKeys: denyCacheKeys as number }
}
