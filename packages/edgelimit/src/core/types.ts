/** Why a request was denied. */
export type DenyReason = 'limit-exceeded' | 'cost-exceeds-limit'

/** Fixed window: aligned windows `[kW, (k+1)W)`. */
export interface FixedWindowPolicy {
  readonly algorithm: 'fixed-window'
  readonly limit: number
  readonly windowMs: number
}

/** Sliding-window log: exact, keeps each admitted request's time and cost. */
export interface SlidingLogPolicy {
  readonly algorithm: 'sliding-log'
  readonly limit: number
  readonly windowMs: number
}

/** Sliding-window counter: two aligned counters, previous one weighted by overlap. */
export interface SlidingWindowPolicy {
  readonly algorithm: 'sliding-window'
  readonly limit: number
  readonly windowMs: number
}

/** Token bucket: starts full with `capacity`, refills `refillRate` per `refillIntervalMs`. */
export interface TokenBucketPolicy {
  readonly algorithm: 'token-bucket'
  readonly capacity: number
  readonly refillRate: number
  readonly refillIntervalMs: number
}

/** Leaky bucket: `police` meters (denies overflow), `shape` queues (delays up to `capacity`). */
export interface LeakyBucketPolicy {
  readonly algorithm: 'leaky-bucket'
  readonly mode: 'police' | 'shape'
  readonly capacity: number
  readonly leakRate: number
  readonly leakIntervalMs: number
}

/** GCRA: `limit` per `periodMs` sustained, bursts of up to `burst`. */
export interface GcraPolicy {
  readonly algorithm: 'gcra'
  readonly limit: number
  readonly periodMs: number
  readonly burst: number
}

/** A validated, serialisable policy: what every store (memory, Lua, Durable Object) evaluates. */
export type Policy =
  | FixedWindowPolicy
  | SlidingLogPolicy
  | SlidingWindowPolicy
  | TokenBucketPolicy
  | LeakyBucketPolicy
  | GcraPolicy

/** The name of an algorithm. */
export type AlgorithmName = Policy['algorithm']

/**
 * One rule's verdict, written by the core into a caller-owned object so the hot path allocates
 * nothing. `next` holds the state to store if the request is admitted (numeric algorithms).
 */
export interface Verdict {
  allowed: boolean
  remaining: number
  resetAfterMs: number
  retryAfterMs: number
  delayMs: number
  reason: DenyReason | undefined
  /** How long `next` must be kept; after that it equals a fresh key. */
  ttlMs: number
  /**
   * The numeric state after charging the cost (`width` entries), written on every path: stored on
   * admission, or on denial when a charge is forced (syncing counts admitted elsewhere).
   */
  next: number[]
}

/** A numeric state row: `width` numbers at `offset`. All zeros is a fresh key. */
export type Row = { [index: number]: number }

/**
 * A policy compiled for the hot path: constants derived once, state as a fixed-width numeric row
 * (all zeros = fresh). `decide` reads the row and never writes it; the caller stores
 * `verdict.next` if the request is admitted, so several rules can be all-or-nothing.
 */
export interface NumericRule {
  readonly kind: 'numeric'
  readonly policy: Policy
  /** The quota reported as `limit`. */
  readonly limit: number
  /**
   * The time over which `limit` applies: the window, or for buckets and GCRA the time a drained
   * key takes to be whole again (ms, possibly fractional).
   */
  readonly periodMs: number
  readonly width: number
  decide(row: Row, offset: number, now: number, cost: number, out: Verdict): void
  /** The instant after which the row equals a fresh key (for reclaiming memory). */
  expiresAt(row: Row, offset: number): number
}

/** Creates a blank verdict object of the given state width. */
export function newVerdict(width = 3): Verdict {
  return {
    allowed: false,
    remaining: 0,
    resetAfterMs: 0,
    retryAfterMs: 0,
    delayMs: 0,
    reason: undefined,
    ttlMs: 0,
    next: new Array<number>(width).fill(0),
  }
}

/** A verdict's public fields, copied out of the reused verdict object. */
export function plainVerdict<R>(
  v: Readonly<Omit<Verdict, 'ttlMs' | 'next' | 'reason'>> & { readonly reason: R },
): Omit<Verdict, 'ttlMs' | 'next' | 'reason'> & { reason: R } {
  // The rest of the fields, which are the public ones: fewer bytes on the edge than naming them.
  const { ttlMs, next, ...plain } = v as typeof v & Pick<Verdict, 'ttlMs' | 'next'>
  return plain
}
