import type { Policy } from './core/types.js'
import type { Duration } from './duration.js'
import { describe } from './errors.js'
import type { Issues } from './validate.js'

/** An algorithm as the user wrote it; validated (with every other option) by `createLimiter`. */
export interface AlgorithmSpec {
  readonly algorithm: Policy['algorithm']
  readonly options: Readonly<Record<string, unknown>>
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
export function fixedWindow(options: WindowOptions): AlgorithmSpec {
  return { algorithm: 'fixed-window', options: { ...options } }
}

/**
 * Sliding-window log: exact — never more than `limit` in any span of `window`; state grows with
 * the limit (one entry per admitted instant).
 * @example slidingLog({ limit: 5, window: '1m' })
 */
export function slidingLog(options: WindowOptions): AlgorithmSpec {
  return { algorithm: 'sliding-log', options: { ...options } }
}

/**
 * Sliding-window counter: two counters, previous window weighted by overlap — close to exact at
 * constant memory.
 * @example slidingWindow({ limit: 100, window: '60s' })
 */
export function slidingWindow(options: WindowOptions): AlgorithmSpec {
  return { algorithm: 'sliding-window', options: { ...options } }
}

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
export function tokenBucket(options: TokenBucketOptions): AlgorithmSpec {
  return { algorithm: 'token-bucket', options: { ...options } }
}

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
export function leakyBucket(options: LeakyBucketOptions): AlgorithmSpec {
  return { algorithm: 'leaky-bucket', options: { ...options } }
}

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
export function gcra(options: GcraOptions): AlgorithmSpec {
  return { algorithm: 'gcra', options: { ...options } }
}

const ALGORITHMS: readonly Policy['algorithm'][] = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-bucket',
  'gcra',
]

/** Validates an algorithm spec at `path` into a policy; reports problems into `issues`. */
export function toPolicy(spec: unknown, path: string, issues: Issues): Policy | undefined {
  if (!issues.object(path, spec)) return undefined
  const name = spec.algorithm
  if (!(ALGORITHMS as readonly unknown[]).includes(name)) {
    issues.add(
      `${path}.algorithm`,
      'ERR_UNKNOWN_ALGORITHM',
      `expected one of ${ALGORITHMS.join(', ')} (use the factories such as tokenBucket()), got ${describe(name)}`,
    )
    return undefined
  }
  const o = (spec.options ?? {}) as Record<string, unknown>
  if (!issues.object(path, o)) return undefined
  const before = issues.list.length
  const policy = build(name as Policy['algorithm'], o, path, issues)
  if (policy === undefined || issues.list.length > before) return undefined
  return policy
}

function build(
  name: Policy['algorithm'],
  o: Record<string, unknown>,
  path: string,
  issues: Issues,
): Policy | undefined {
  switch (name) {
    case 'fixed-window':
    case 'sliding-log':
    case 'sliding-window': {
      const limit = issues.integer(`${path}.limit`, o.limit, 1)
      const windowMs = issues.duration(`${path}.window`, o.window)
      if (limit === undefined || windowMs === undefined) return undefined
      if (!safe(limit * windowMs, `${path}.limit`, 'limit × window', issues)) return undefined
      return { algorithm: name, limit, windowMs }
    }
    case 'token-bucket': {
      const capacity = issues.integer(`${path}.capacity`, o.capacity, 1)
      const refillRate = issues.integer(`${path}.refillRate`, o.refillRate, 1)
      const refillIntervalMs = issues.duration(`${path}.refillInterval`, o.refillInterval ?? 1000)
      if (capacity === undefined || refillRate === undefined || refillIntervalMs === undefined)
        return undefined
      if (!safe(capacity * refillIntervalMs, `${path}.capacity`, 'capacity × refillInterval', issues))
        return undefined
      return { algorithm: name, capacity, refillRate, refillIntervalMs }
    }
    case 'leaky-bucket': {
      const mode = issues.oneOf(`${path}.mode`, o.mode ?? 'police', ['police', 'shape'] as const)
      const capacity = issues.integer(`${path}.capacity`, o.capacity, mode === 'shape' ? 0 : 1)
      const leakRate = issues.integer(`${path}.leakRate`, o.leakRate, 1)
      const leakIntervalMs = issues.duration(`${path}.leakInterval`, o.leakInterval ?? 1000)
      if (
        mode === undefined ||
        capacity === undefined ||
        leakRate === undefined ||
        leakIntervalMs === undefined
      ) {
        return undefined
      }
      if (!safe((capacity + 1) * leakIntervalMs, `${path}.capacity`, 'capacity × leakInterval', issues))
        return undefined
      return { algorithm: name, mode, capacity, leakRate, leakIntervalMs }
    }
    case 'gcra': {
      const limit = issues.integer(`${path}.limit`, o.limit, 1)
      const periodMs = issues.duration(`${path}.period`, o.period)
      const burst = issues.integer(`${path}.burst`, o.burst ?? limit, 1)
      if (limit === undefined || periodMs === undefined || burst === undefined) return undefined
      if (!safe(burst * periodMs, `${path}.burst`, 'burst × period', issues)) return undefined
      return { algorithm: name, limit, periodMs, burst }
    }
  }
}

/** Exact arithmetic needs the policy's largest product below 2^53. */
function safe(product: number, path: string, what: string, issues: Issues): boolean {
  if (product <= EXACT_BOUND) return true
  issues.add(path, 'ERR_RANGE', `${what} is ${product}, above the exact-arithmetic bound ${EXACT_BOUND}`)
  return false
}

/** The largest product a policy may need; leaves headroom below 2^53 for sums of them. */
const EXACT_BOUND = Math.floor(Number.MAX_SAFE_INTEGER / 4)
