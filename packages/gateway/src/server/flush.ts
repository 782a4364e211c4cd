import type { Limiter } from 'edgelimit'
import { within } from '../library.js'

/**
 * Flushes the limiters' approximate counts, for at most `ms` when given: resolves the limiters
 * whose flush failed or had not ended by then, and the first error.
 */
export async function flushAll(
  limiters: Iterable<Limiter>,
  ms?: number,
): Promise<{ unsent: Limiter[]; error: string | undefined }> {
  const left = new Set(limiters)
  let error: string | undefined
  const all = Promise.all(
    [...left].map((limiter) =>
      limiter.flush().then(
        () => void left.delete(limiter),
        (e: unknown) => {
          error ??= e instanceof Error ? e.message : String(e)
        },
      ),
    ),
  )
  await (ms === undefined ? all : within(all, ms))
  return { unsent: [...left], error }
}

/** The rule names (`<rule>` or `<rule>.<tier>`) of limiters, for logs. */
export function ruleNames(limiters: readonly Limiter[]): string[] {
  return limiters.flatMap((l) => l.rules.map((r) => r.name))
}
