// The slice of the Workers runtime the Durable Object store uses, as structural types: the
// library compiles without @cloudflare/workers-types, and the real types satisfy these.

/** A row cursor from `ctx.storage.sql.exec()`: iterable, row by row. */
export interface SqlCursor extends Iterable<Record<string, string | number | null | ArrayBuffer>> {
  toArray(): Record<string, string | number | null | ArrayBuffer>[]
}

/** `ctx.storage.sql` of a SQLite-backed Durable Object class. */
export interface SqlStorage {
  exec(query: string, ...bindings: (string | number | null)[]): SqlCursor
}

/** `ctx.storage` of a SQLite-backed Durable Object. */
export interface DurableObjectStorageLike {
  readonly sql: SqlStorage
  /** Runs `closure` in a transaction: rolled back, and rethrown, when it throws. */
  transactionSync<T>(closure: () => T): T
  setAlarm(scheduledTime: number): Promise<void>
  deleteAll(): Promise<void>
}

/** The `ctx` a Durable Object is constructed with. */
export interface DurableObjectContext {
  readonly storage: DurableObjectStorageLike
}

/** A Durable Object id (`namespace.idFromName(…)`). */
export interface DurableObjectIdLike {
  toString(): string
}

/**
 * A Durable Object namespace binding (`env.RATE_LIMITER`) bound to `EdgelimitDurableObject`.
 * Any `DurableObjectNamespace` from the runtime fits.
 */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): DurableObjectIdLike
  get(id: DurableObjectIdLike, options?: { locationHint?: string }): object
}

/** The `ctx` of a Worker's `fetch(request, env, ctx)`: what `withWaitUntil` needs. */
export interface WaitUntilContext {
  waitUntil(promise: Promise<unknown>): void
}
