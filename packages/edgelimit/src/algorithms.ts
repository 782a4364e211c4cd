import { compileFixedWindow } from './core/fixed-window.js'
import { compileGcra } from './core/gcra.js'
import type { CompiledRule } from './core/index.js'
import { compileLeakyBucket } from './core/leaky-bucket.js'
import { compileSlidingLog } from './core/sliding-log.js'
import { compileSlidingWindow } from './core/sliding-window.js'
import { compileTokenBucket } from './core/token-bucket.js'
import type { Policy } from './core/types.js'
import type { Duration } from './duration.js'
import { ConfigError, describe } from './errors.js'
import type { Issues } from './validate.js'

/**
 * An algorithm's implementation: how its options are validated into a policy, and the compiled
 * core that in-process stores run. Each factory carries its own, so a bundle holds only the
 * algorithms it imports (see docs/decisions/0007-algorithms-travel-with-their-factories.md).
 */
export interface AlgorithmDefinition {
  readonly name: Policy['algorithm']
  /** The names of its options, space-separated: any other name is refused. */
  readonly options: string
  /** Validates options (at `path`) into a policy; reports every problem into `issues`. */
  policy(options: Record<string, unknown>, path: string, issues: Issues): Policy | undefined
  /** The policy's hot-path form (stateless: one compiled rule serves every store and key). */
  compile(policy: Policy): CompiledRule
}

/** An algorithm as the user wrote it; validated (with every other option) by `createLimiter`. */
export interface AlgorithmSpec {
  readonly algorithm: Policy['algorithm']
  readonly options: Readonly<Record<string, unknown>>
  /** Attached by the factory; plain `{ algorithm, options }` objects are refused. */
  readonly definition: AlgorithmDefinition
}

/**
 * An algorithm factory: call it with options for a rule's `algorithm`; its `definition` lists it
 * for `durableObjectClass()`.
 */
export type AlgorithmFactory<O> = ((options: O) => AlgorithmSpec) & {
  readonly definition: AlgorithmDefinition
}

function define<O>(
  name: Policy['algorithm'],
  options: string,
  // Each builder and compiler takes its own algorithm's types: `never` accepts them all.
  policy: (algorithm: never, o: Record<string, unknown>, path: string, issues: Issues) => Policy | undefined,
  compile: (policy: never) => CompiledRule,
): AlgorithmFactory<O> {
  const definition: AlgorithmDefinition = {
    name,
    options,
    policy: policy.bind(undefined, name as never),
    compile: compile as (policy: Policy) => CompiledRule,
  }
  const factory = (options: O): AlgorithmSpec => ({
    algorithm: name,
    options: { ...options } as Record<string, unknown>,
    definition,
  })
  factory.definition = definition
  return factory
}

/**
 * `compile`, refusing a policy with a number that is not a non-negative safe integer, or an
 * interval (`…Ms`) that is not positive (`ERR_INTEGER` at `<algorithm>.<field>`). The factories
 * never build one, but a hand-built definition's `policy()` can (`periodMs: NaN`, `0`), and the
 * exact arithmetic of the algorithms that take it (`gcd`) would not end on it, or admit everything.
 * Checked once per compile, never per decision.
 */
function integral<P extends Policy>(compile: (policy: P) => CompiledRule): (policy: P) => CompiledRule {
  return (policy) => {
    for (const [name, value] of Object.entries(policy))
      if (
        typeof value === 'number' &&
        !(Number.isSafeInteger(value) && value > (name.endsWith('Ms') ? 0 : -1))
      )
        throw new ConfigError([
          {
            path: `${policy.algorithm}.${name}`,
            code: 'ERR_INTEGER',
            message: `expected a ${name.endsWith('Ms') ? 'positive' : 'non-negative'} integer, got ${describe(value)}`,
          },
        ])
    return compile(policy)
  }
}

/** Options of the window-based algorithms. */
export interface WindowOptions {
  /** Requests (cost units) admitted per window. */
  limit: number
  /** Window length. @example '60s' */
  window: Duration
}

/**
 * Fixed window: `limit` per epoch-aligned window. Cheapest and simplest; admits up to 2× the limit
 * across a window boundary.
 * @example fixedWindow({ limit: 100, window: '1m' })
 */
export const fixedWindow: AlgorithmFactory<WindowOptions> = /* @__PURE__ */ define(
  'fixed-window',
  'limit window',
  windowPolicy,
  compileFixedWindow,
)

/**
 * Sliding-window log: exact — never more than `limit` in any span of `window`; state grows with
 * the limit (one entry per admitted instant).
 * @example slidingLog({ limit: 5, window: '1m' })
 */
export const slidingLog: AlgorithmFactory<WindowOptions> = /* @__PURE__ */ define(
  'sliding-log',
  'limit window',
  windowPolicy,
  compileSlidingLog,
)

/**
 * Sliding-window counter: two counters, previous window weighted by overlap — close to exact at
 * constant memory.
 * @example slidingWindow({ limit: 100, window: '60s' })
 */
export const slidingWindow: AlgorithmFactory<WindowOptions> = /* @__PURE__ */ define(
  'sliding-window',
  'limit window',
  windowPolicy,
  compileSlidingWindow,
)

/** Options of the token bucket. */
export interface TokenBucketOptions {
  /** Bucket size: the largest burst. */
  capacity: number
  /** Tokens added per `refillInterval`, continuously. */
  refillRate: number
  /** @default '1s' */
  refillInterval?: Duration
}

/**
 * Token bucket: bursts up to `capacity`, sustained `refillRate` per `refillInterval`.
 * @example tokenBucket({ capacity: 20, refillRate: 10 }) // 10/s, bursts of 20
 */
export const tokenBucket: AlgorithmFactory<TokenBucketOptions> = /* @__PURE__ */ define(
  'token-bucket',
  'capacity refillRate refillInterval',
  tokenBucketPolicy,
  /* @__PURE__ */ integral(compileTokenBucket),
)

/** Options of the leaky bucket. */
export interface LeakyBucketOptions {
  /** `police`: bucket size; `shape`: how many requests may wait in the queue. */
  capacity: number
  /** Requests drained per `leakInterval`. */
  leakRate: number
  /** @default '1s' */
  leakInterval?: Duration
  /** `police` denies overflow; `shape` delays requests to a constant rate (see `delayMs`). @default 'police' */
  mode?: 'police' | 'shape'
}

/**
 * Leaky bucket: a meter (`police`) or a queue that smooths output to a constant rate (`shape`).
 * @example leakyBucket({ capacity: 10, leakRate: 5, mode: 'shape' })
 */
export const leakyBucket: AlgorithmFactory<LeakyBucketOptions> = /* @__PURE__ */ define(
  'leaky-bucket',
  'capacity leakRate leakInterval mode',
  leakyBucketPolicy,
  /* @__PURE__ */ integral(compileLeakyBucket),
)

/** Options of GCRA. */
export interface GcraOptions {
  /** Sustained requests per `period`. */
  limit: number
  period: Duration
  /** Largest burst. @default limit */
  burst?: number
}

/**
 * GCRA: token-bucket behaviour in a single timestamp per key — the cheapest state.
 * @example gcra({ limit: 10, period: '1s', burst: 20 })
 */
export const gcra: AlgorithmFactory<GcraOptions> = /* @__PURE__ */ define(
  'gcra',
  'limit period burst',
  gcraPolicy,
  /* @__PURE__ */ integral(compileGcra),
)

const FACTORIES = {
  'fixed-window': fixedWindow,
  'sliding-log': slidingLog,
  'sliding-window': slidingWindow,
  'token-bucket': tokenBucket,
  'leaky-bucket': leakyBucket,
  gcra,
} as const

/**
 * The spec a factory makes, from its plain form `{ algorithm, options }` — a rule read from JSON
 * or YAML, or one that crossed `postMessage` or `JSON.stringify` (which keep only plain data). An
 * unknown name gives a spec that `createLimiter` reports with the rest of the options. Imports
 * every algorithm; a bundle that calls the factories directly carries only those it uses.
 *
 * @example algorithmSpec({ algorithm: 'gcra', options: { limit: 10, period: '1s' } }) // = gcra({ … })
 */
export function algorithmSpec(plain: {
  readonly algorithm: string
  readonly options?: object
}): AlgorithmSpec {
  if (typeof plain !== 'object' || plain === null || !Object.hasOwn(FACTORIES, plain.algorithm))
    return plain as AlgorithmSpec
  const factory = FACTORIES[plain.algorithm as keyof typeof FACTORIES] as AlgorithmFactory<unknown>
  return factory(plain.options ?? {})
}

/** Validates an algorithm spec at `path`; reports problems into `issues`. */
export function toPolicy(
  spec: unknown,
  path: string,
  issues: Issues,
): { readonly policy: Policy; readonly compiled: CompiledRule } | undefined {
  if (!issues.object(path, spec)) return undefined
  const definition = spec.definition as Partial<AlgorithmDefinition> | undefined
  if (typeof definition?.policy !== 'function' || definition.name !== spec.algorithm) {
    issues.add(
      `${path}.algorithm`,
      'ERR_UNKNOWN_ALGORITHM',
      `expected a spec from an algorithm factory such as slidingWindow(), or algorithmSpec(), got ${describe(spec.algorithm)}`,
    )
    return undefined
  }
  const o = (spec.options ?? {}) as Record<string, unknown>
  if (!issues.object(path, o, definition.options)) return undefined
  const before = issues.list.length
  const policy = definition.policy(o, path, issues)
  if (policy === undefined || issues.list.length > before) return undefined
  return { policy, compiled: (definition as AlgorithmDefinition).compile(policy) }
}

function windowPolicy(
  algorithm: 'fixed-window' | 'sliding-log' | 'sliding-window',
  o: Record<string, unknown>,
  path: string,
  issues: Issues,
): Policy | undefined {
  const limit = issues.integer(`${path}.limit`, o.limit, 1)
  const windowMs = issues.duration(`${path}.window`, o.window)
  if (limit === undefined || windowMs === undefined) return undefined
  // Only the sliding counter multiplies a count by a time (prev · (W − e)): a fixed window and a
  // log only add counts, so 1,000,000 per 30 days is exact for them.
  if (algorithm === 'sliding-window' && !safe(limit * windowMs, `${path}.limit`, 'limit × window', issues))
    return undefined
  return { algorithm, limit, windowMs }
}

function tokenBucketPolicy(
  algorithm: 'token-bucket',
  o: Record<string, unknown>,
  path: string,
  issues: Issues,
): Policy | undefined {
  const capacity = issues.integer(`${path}.capacity`, o.capacity, 1)
  const refillRate = issues.integer(`${path}.refillRate`, o.refillRate, 1)
  const refillIntervalMs = issues.duration(`${path}.refillInterval`, o.refillInterval ?? 1000)
  if (capacity === undefined || refillRate === undefined || refillIntervalMs === undefined) return undefined
  if (!safe(capacity * refillIntervalMs, `${path}.capacity`, 'capacity × refillInterval', issues))
    return undefined
  return { algorithm, capacity, refillRate, refillIntervalMs }
}

function leakyBucketPolicy(
  algorithm: 'leaky-bucket',
  o: Record<string, unknown>,
  path: string,
  issues: Issues,
): Policy | undefined {
  const mode = issues.oneOf(`${path}.mode`, o.mode ?? 'police', ['police', 'shape'] as const)
  const capacity = issues.integer(`${path}.capacity`, o.capacity, mode === 'shape' ? 0 : 1)
  const leakRate = issues.integer(`${path}.leakRate`, o.leakRate, 1)
  const leakIntervalMs = issues.duration(`${path}.leakInterval`, o.leakInterval ?? 1000)
  if (mode === undefined || capacity === undefined || leakRate === undefined || leakIntervalMs === undefined)
    return undefined
  if (!safe((capacity + 1) * leakIntervalMs, `${path}.capacity`, 'capacity × leakInterval', issues))
    return undefined
  return { algorithm, mode, capacity, leakRate, leakIntervalMs }
}

function gcraPolicy(
  algorithm: 'gcra',
  o: Record<string, unknown>,
  path: string,
  issues: Issues,
): Policy | undefined {
  const limit = issues.integer(`${path}.limit`, o.limit, 1)
  const periodMs = issues.duration(`${path}.period`, o.period)
  // An omitted burst is the limit: its problem, if any, is reported once, under limit.
  const burst = o.burst === undefined ? limit : issues.integer(`${path}.burst`, o.burst, 1)
  if (limit === undefined || periodMs === undefined || burst === undefined) return undefined
  if (!safe(burst * periodMs, `${path}.burst`, 'burst × period', issues)) return undefined
  return { algorithm, limit, periodMs, burst }
}

/** Exact arithmetic needs the policy's largest product below 2^53. */
function safe(product: number, path: string, what: string, issues: Issues): boolean {
  if (product <= EXACT_BOUND) return true
  issues.add(path, 'ERR_RANGE', `${what} is ${product}, above the exact-arithmetic bound ${EXACT_BOUND}`)
  return false
}

/** The largest product a policy may need, ⌊(2^53 − 1) / 4⌋; leaves headroom below 2^53 for sums of them. */
const EXACT_BOUND = 2 ** 51 - 1
