/**
 * Traffic to simulate: requests in time order, columnar (a scenario can hold a million requests
 * without a million objects). Times are integer ms from the start of the trace.
 */
export interface Trace {
  readonly name: string
  readonly description: string
  /** The limit and window the scenario is about (the algorithms are configured from them). */
  readonly limit: number
  readonly windowMs: number
  readonly durationMs: number
  /** Epoch ms of time 0 (a trace file's first request; 0 for built-in scenarios): windows stay epoch-aligned. */
  readonly originMs: number
  readonly n: number
  readonly t: Float64Array
  /** Index into `keys` (the client, e.g. its IP). */
  readonly key: Int32Array
  /** Index into `paths`. */
  readonly path: Int32Array
  readonly method: Int32Array
  readonly cost: Uint32Array | undefined
  readonly keys: readonly string[]
  readonly paths: readonly string[]
  readonly methods: readonly string[]
  /** Group of each key (index into `groups`): attacker, legit, … */
  readonly group: Uint8Array
  readonly groups: readonly string[]
  /** The fields of `TRACE_FIELDS` the trace carries (an access log's user agent and query, …). */
  readonly fields: Readonly<Partial<Record<TraceField, TraceColumn>>>
}

/** Request fields a trace may carry beyond key, path and method, for the rules that read them. */
export const TRACE_FIELDS = ['ua', 'query', 'host'] as const
export type TraceField = (typeof TRACE_FIELDS)[number]

/** One field of every request: an index into `values` (`''` where a request has none). */
export interface TraceColumn {
  readonly of: Int32Array
  readonly values: readonly string[]
}

/** Collects requests in any order, then sorts them (stable) into a `Trace`. */
export interface TraceBuilder {
  /** Interns a key in a group; returns its index. */
  client(name: string, group: string): number
  add(
    t: number,
    client: number,
    path?: string,
    method?: string,
    cost?: number,
    fields?: Partial<Record<TraceField, string>>,
  ): void
  build(meta: {
    name: string
    description: string
    limit: number
    windowMs: number
    durationMs: number
    originMs?: number
  }): Trace
}

/** Creates a trace builder. */
export function traceBuilder(): TraceBuilder {
  const times: number[] = []
  const clients: number[] = []
  const pathIds: number[] = []
  const methodIds: number[] = []
  const costs: number[] = []
  const keys: string[] = []
  const keyGroups: number[] = []
  const groups: string[] = []
  const paths = new Map<string, number>()
  const methods = new Map<string, number>()
  const keyIndex = new Map<string, number>()
  // Per field: its values interned, and each request's (filled in only once a request has one).
  const columns = new Map<TraceField, { values: Map<string, number>; of: number[] }>()
  let anyCost = false
  const intern = (m: Map<string, number>, s: string) => {
    let i = m.get(s)
    if (i === undefined) {
      i = m.size
      m.set(s, i)
    }
    return i
  }
  return {
    client(name, group) {
      let i = keyIndex.get(name)
      if (i === undefined) {
        i = keys.length
        keys.push(name)
        keyIndex.set(name, i)
        let g = groups.indexOf(group)
        if (g < 0) g = groups.push(group) - 1
        keyGroups.push(g)
      }
      return i
    },
    add(t, client, path = '/', method = 'GET', cost = 1, fields) {
      if (fields !== undefined) {
        for (const f of TRACE_FIELDS) {
          const v = fields[f]
          if (v === undefined || v === '') continue
          let column = columns.get(f)
          if (column === undefined) {
            column = { values: new Map([['', 0]]), of: [] }
            columns.set(f, column)
          }
          column.of[times.length] = intern(column.values, v)
        }
      }
      times.push(Math.max(0, Math.round(t)))
      clients.push(client)
      pathIds.push(intern(paths, path))
      methodIds.push(intern(methods, method))
      costs.push(cost)
      if (cost !== 1) anyCost = true
    },
    build(meta) {
      const n = times.length
      const order = Array.from({ length: n }, (_, i) => i)
      order.sort((a, b) => (times[a] as number) - (times[b] as number) || a - b)
      const pick = <A extends Float64Array | Int32Array | Uint32Array>(
        make: new (n: number) => A,
        from: number[],
      ) => {
        const out = new make(n)
        order.forEach((j, i) => {
          out[i] = from[j] as number
        })
        return out
      }
      return {
        originMs: 0,
        ...meta,
        n,
        t: pick(Float64Array, times),
        key: pick(Int32Array, clients),
        path: pick(Int32Array, pathIds),
        method: pick(Int32Array, methodIds),
        cost: anyCost ? pick(Uint32Array, costs) : undefined,
        keys,
        paths: [...paths.keys()],
        methods: [...methods.keys()],
        group: Uint8Array.from(keyGroups),
        groups,
        fields: Object.fromEntries(
          [...columns].map(([f, c]) => {
            // Requests without the field (holes) are index 0, `''`.
            const of = new Int32Array(n)
            order.forEach((j, i) => {
              of[i] = c.of[j] ?? 0
            })
            return [f, { of, values: [...c.values.keys()] }]
          }),
        ),
      }
    },
  }
}

/** A seeded pseudo-random generator (mulberry32): the same seed gives the same scenario. */
export function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** An exponentially distributed delay with the given mean (Poisson arrivals). */
export function exponential(rand: () => number, mean: number): number {
  return -Math.log(1 - rand()) * mean
}
