export {
  type AlgorithmSpec,
  fixedWindow,
  type GcraOptions,
  gcra,
  type LeakyBucketOptions,
  leakyBucket,
  slidingLog,
  slidingWindow,
  type TokenBucketOptions,
  tokenBucket,
  type WindowOptions,
} from './algorithms.js'
export { type Clock, systemClock } from './clock.js'
export type { DenyReason, Policy } from './core/types.js'
export { type Duration, parseDuration } from './duration.js'
export { ConfigError, type ConfigIssue, EdgelimitError, type ErrorCode } from './errors.js'
export {
  createLimiter,
  type Decision,
  type Limiter,
  type LimiterOptions,
  type LimitOptions,
  type Rule,
  type RuleDecision,
} from './limiter.js'
export { type MemoryRules, type MemoryStore, type MemoryStoreOptions, memoryStore } from './stores/memory.js'
export type { BoundRules, RuleVerdict, Store, StoreRule } from './stores/types.js'
