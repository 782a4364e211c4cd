import {
  type AlgorithmSpec,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from 'edgelimit'
import type { PolicyRule } from '../replay/policy.js'
import type { LogRecord } from '../replay/record.js'
import type { Trace, TraceField } from './trace.js'

/** One limiter run over the trace. */
export interface Contestant {
  readonly id: string
  readonly label: string
  readonly spec: AlgorithmSpec
  /** The limit and window it stands for: its exact sliding log, and the span it is measured over. */
  readonly nominal: { readonly limit: number; readonly windowMs: number }
  /** The key of request `i`; by default the client. */
  readonly keyOf?: (trace: Trace, i: number) => string
  /** Whether the contestant applies to request `i`; by default every request. */
  readonly matches?: (trace: Trace, i: number) => boolean
  /** Contestants with the same `scope` key and match requests alike (they share one reference). */
  readonly scope?: string
  /** Cost of each request (the rule's `cost`); by default the trace's. */
  readonly cost?: number
}

/** Every algorithm configured for `limit` per `window`: the same sustained rate, bursts of `limit`. */
export const ALGORITHM_IDS = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-police',
  'leaky-shape',
  'gcra',
] as const

/** The default contestants: each algorithm at `limit` per `windowMs`. */
export function defaultContestants(limit: number, windowMs: number, only?: readonly string[]): Contestant[] {
  const w = windowMs
  const all: Contestant[] = [
    {
      id: 'fixed-window',
      label: 'fixed window',
      spec: fixedWindow({ limit, window: w }),
      nominal: { limit, windowMs: w },
    },
    {
      id: 'sliding-log',
      label: 'sliding log (exact)',
      spec: slidingLog({ limit, window: w }),
      nominal: { limit, windowMs: w },
    },
    {
      id: 'sliding-window',
      label: 'sliding window counter',
      spec: slidingWindow({ limit, window: w }),
      nominal: { limit, windowMs: w },
    },
    {
      id: 'token-bucket',
      label: 'token bucket',
      spec: tokenBucket({ capacity: limit, refillRate: limit, refillInterval: w }),
      nominal: { limit, windowMs: w },
    },
    {
      id: 'leaky-police',
      label: 'leaky bucket (police)',
      spec: leakyBucket({ capacity: limit, leakRate: limit, leakInterval: w, mode: 'police' }),
      nominal: { limit, windowMs: w },
    },
    {
      id: 'leaky-shape',
      label: 'leaky bucket (shape)',
      spec: leakyBucket({ capacity: limit, leakRate: limit, leakInterval: w, mode: 'shape' }),
      nominal: { limit, windowMs: w },
    },
    {
      id: 'gcra',
      label: 'GCRA',
      spec: gcra({ limit, period: w, burst: limit }),
      nominal: { limit, windowMs: w },
    },
  ]
  return only === undefined ? all : all.filter((c) => only.includes(c.id))
}

/**
 * The rules of a policy as contestants, keyed and matched as the gateway does: one per rule, or
 * one per tier (each taking the requests the rule's tier selection gives it).
 */
export function policyContestants(rules: readonly PolicyRule[]): Contestant[] {
  const record: LogRecord = {
    ts: 0,
    ip: '',
    user: '-',
    method: 'GET',
    path: '/',
    status: 200,
    query: '',
    host: '',
    ua: '-',
    json: undefined,
  }
  const field = (trace: Trace, f: TraceField, i: number) => {
    const column = trace.fields[f]
    return column === undefined ? '' : (column.values[column.of[i] as number] as string)
  }
  const at = (trace: Trace, i: number) => {
    record.ts = trace.t[i] as number
    record.ip = trace.keys[trace.key[i] as number] as string
    record.path = trace.paths[trace.path[i] as number] as string
    record.method = trace.methods[trace.method[i] as number] as string
    record.ua = field(trace, 'ua', i) || '-'
    record.query = field(trace, 'query', i)
    record.host = field(trace, 'host', i)
    return record
  }
  return rules.flatMap((r) =>
    r.plans.map((plan, p): Contestant => {
      const keyOf = (trace: Trace, i: number) => {
        const rec = at(trace, i)
        return r.keyOf(rec, r.match(rec) ?? '*')
      }
      return {
        id: plan.name,
        label: plan.name,
        spec: plan.algorithm,
        nominal: plan.nominal,
        keyOf,
        matches: (trace, i) => {
          const rec = at(trace, i)
          const route = r.match(rec)
          return route !== undefined && (r.plans.length === 1 || r.planOf(rec, r.keyOf(rec, route)) === p)
        },
        scope: plan.name,
        cost: r.cost,
      }
    }),
  )
}

/** The trace field that holds what a rule reads (`PolicyRule.reads`), if a trace can carry it. */
function fieldOf(read: string): TraceField | undefined {
  if (read === 'host') return 'host'
  if (read === 'header:user-agent') return 'ua'
  return read.startsWith('query:') ? 'query' : undefined
}

/**
 * What the rules read that the trace does not carry (another header, or a field no request of
 * the trace has): one message per rule and field. Such a rule decides as if no request had it.
 *
 * @example traceGaps(loadPolicy('edgelimit.yaml'), trace) // ['by-tenant: reads header:x-tenant, …']
 */
export function traceGaps(rules: readonly PolicyRule[], trace: Trace): string[] {
  return rules.flatMap((r) =>
    r.reads
      .filter((read) => {
        const f = fieldOf(read)
        return f === undefined || trace.fields[f] === undefined
      })
      .map(
        (read) =>
          `${r.name}: reads ${read}, which the trace does not carry: decided as if no request had it (a key falls back to the client)`,
      ),
  )
}
