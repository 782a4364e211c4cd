import type { Decision } from './limiter.js'
import type { BreakerState } from './resilience/breaker.js'

/**
 * How a decision was reached: `store` (the store's answer; every in-process decision too),
 * `cache` (a denial the store would repeat, answered in-process), `local` (a `consistency:
 * 'local'` rule denied in-process, the store was not asked), `approximate` (counted in-process,
 * synced later), `fallback` (the store failed: the rules' `onStoreError` answered).
 */
export type DecisionSource = 'store' | 'cache' | 'local' | 'approximate' | 'fallback'

/** What a limiter reports through `onEvent` (see `meterSink` for OpenTelemetry). */
export type LimiterEvent =
  | {
      readonly type: 'decision'
      readonly key: string
      /**
       * The units the call asked for (`limit()`'s `cost`, 1 by default), charged only when it is
       * admitted: 0 for a peek (`peek()`, or `limit()` with `cost: 0`), which charges nothing.
       */
      readonly cost: number
      readonly decision: Decision
      readonly source: DecisionSource
    }
  | { readonly type: 'shadow-deny'; readonly key: string; readonly rule: string; readonly decision: Decision }
  | {
      /**
       * A store call that failed or missed the deadline (`breaker-open`: not sent): a decision's,
       * an approximate sync's, or a `reset()`'s, which then rejects too.
       */
      readonly type: 'store-error'
      readonly kind: 'timeout' | 'error' | 'breaker-open'
      readonly error?: unknown
      readonly latencyMs: number
    }
  | {
      readonly type: 'fallback'
      readonly mode: 'open' | 'closed' | 'local'
      readonly rule: string
      readonly key: string
    }
  | { readonly type: 'breaker'; readonly state: BreakerState }
  | { readonly type: 'store-latency'; readonly ms: number }

/**
 * Receives a limiter's events (`onEvent`). An async sink fits too (`void` takes any result): a
 * rejection is dropped, as a synchronous sink's throw is, and never changes a decision.
 */
export type EventSink = (event: LimiterEvent) => void

/** The slice of an OpenTelemetry `Meter` edgelimit uses (from `@opentelemetry/api`). */
export interface MeterLike {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): {
    add(value: number, attributes?: Record<string, string>): void
  }
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): {
    record(value: number, attributes?: Record<string, string>): void
  }
  createUpDownCounter(
    name: string,
    options?: { description?: string },
  ): {
    add(value: number, attributes?: Record<string, string>): void
  }
}

/**
 * Turns events into OpenTelemetry instruments: `edgelimit.decisions` (by rule and outcome:
 * allowed, denied, shadow_denied, and unknown for a rule whose state is not known here, see
 * `RuleDecision.unknown`; peeks, `cost: 0`, charge nothing and are not counted),
 * `edgelimit.store.errors` (by kind), `edgelimit.fallbacks` (by mode), `edgelimit.breaker.open`
 * (how many of the breakers it observes are open: 1 while a limiter's is; one sink may serve
 * several limiters), `edgelimit.store.latency` (ms histogram, buckets from 0.1 ms to 1 s).
 *
 * @example
 * import { metrics } from '@opentelemetry/api'
 * createLimiter({ rules, store, onEvent: meterSink(metrics.getMeter('edgelimit')) })
 */
export function meterSink(meter: MeterLike): EventSink {
  const decisions = meter.createCounter('edgelimit.decisions', {
    description: 'Rate-limit decisions by rule and outcome',
  })
  const errors = meter.createCounter('edgelimit.store.errors', {
    description: 'Store calls that failed or timed out',
  })
  const fallbacks = meter.createCounter('edgelimit.fallbacks', {
    description: 'Rules decided by their onStoreError mode',
  })
  const breaker = meter.createUpDownCounter('edgelimit.breaker.open', {
    description: 'Store breakers open (1 per limiter whose breaker is open)',
  })
  const latency = meter.createHistogram('edgelimit.store.latency', {
    description: 'Store round trip',
    unit: 'ms',
    // The SDK's default boundaries (0, 5, 10, 25, … ms) put every healthy round trip (a Redis call
    // takes well under a millisecond) in its first bucket, and every quantile near 5 ms. These
    // follow the gateway's edgelimit_store_latency_seconds, up to a Durable Object's 1 s deadline.
    advice: { explicitBucketBoundaries: [0.1, 0.25, 0.5, 1, 2, 5, 10, 25, 45, 100, 250, 500, 1000] },
  })
  return (event) => {
    switch (event.type) {
      case 'decision':
        // A peek is a question, not a request: an exhausted key looked at would count as allowed.
        if (event.cost === 0) break
        for (const r of event.decision.rules) {
          // A rule whose state is not known here (not asked, or failing open) did not admit it.
          const outcome = r.unknown
            ? 'unknown'
            : r.allowed
              ? 'allowed'
              : r.shadow
                ? 'shadow_denied'
                : 'denied'
          decisions.add(1, { rule: r.name, outcome, source: event.source })
        }
        break
      case 'store-error':
        errors.add(1, { kind: event.kind })
        break
      case 'fallback':
        fallbacks.add(1, { mode: event.mode, rule: event.rule })
        break
      // Each breaker goes closed → open → half-open → closed or open again: it enters open from
      // closed or half-open and leaves it only for half-open. Counted by transition, not by a
      // state of the sink's own, so that a sink shared by several limiters sums their breakers.
      case 'breaker':
        if (event.state === 'open') breaker.add(1)
        else if (event.state === 'half-open') breaker.add(-1)
        break
      case 'store-latency':
        latency.record(event.ms)
        break
    }
  }
}
