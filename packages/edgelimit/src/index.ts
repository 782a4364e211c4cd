export {
  type AlgorithmDefinition,
  type AlgorithmFactory,
  type AlgorithmSpec,
  algorithmSpec,
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
export { type Clock, type CoarseClockOptions, coarseClock, systemClock } from './clock.js'
export type { DenyReason, Policy } from './core/types.js'
export { type Duration, parseDuration } from './duration.js'
export { ConfigError, type ConfigIssue, EdgelimitError, type ErrorCode } from './errors.js'
export {
  type DecisionSource,
  type EventSink,
  type LimiterEvent,
  type MeterLike,
  meterSink,
} from './events.js'
export {
  type Consistency,
  type ConsistencyMode,
  createLimiter,
  type Decision,
  type DecisionReason,
  type Limiter,
  type LimiterOptions,
  type LimitOptions,
  type Rule,
  type RuleConfig,
  type RuleDecision,
  type StoreErrorMode,
} from './limiter.js'
export { type ApproximateConsistency, approximate } from './resilience/approximate.js'
export type { BreakerOptions, BreakerState } from './resilience/breaker.js'
export { remoteDecider } from './resilience/remote.js'
export { type MemoryRules, type MemoryStore, type MemoryStoreOptions, memoryStore } from './stores/memory.js'
export type {
  BoundRules,
  Decider,
  DecisionContext,
  DecisionPath,
  EvaluateOptions,
  RuleVerdict,
  Store,
  StoreRule,
} from './stores/types.js'
