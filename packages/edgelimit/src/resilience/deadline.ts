import { EdgelimitError } from '../errors.js'

/**
 * Settles with `work`, or rejects with `ERR_EDGELIMIT_TIMEOUT` after `ms` — whichever comes
 * first. The timer is always cleared, and a late rejection of the abandoned work is swallowed
 * (the decision was already made without it), so nothing leaks.
 */
export function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new EdgelimitError('ERR_EDGELIMIT_TIMEOUT', `The store did not answer within ${ms} ms`)),
      ms,
    )
  })
  work.catch(() => {})
  return Promise.race([work, expired]).finally(() => clearTimeout(timer))
}
