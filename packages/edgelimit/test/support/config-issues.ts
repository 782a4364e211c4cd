import { expect } from 'vitest'
import { ConfigError } from '../../src/errors.js'

/**
 * `path → codes` of every issue the ConfigError that `make` throws lists; fails the test when it
 * throws anything else, or nothing.
 * @example expect(issuesOf(() => redisStore({}))).toEqual({ 'options.client': ['ERR_REQUIRED'] })
 */
export function issuesOf(make: () => unknown): Record<string, string[]> {
  try {
    make()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).code).toBe('ERR_EDGELIMIT_CONFIG')
    const out: Record<string, string[]> = {}
    for (const issue of (error as ConfigError).issues)
      out[issue.path] = [...(out[issue.path] ?? []), issue.code]
    return out
  }
  throw new Error('expected a ConfigError')
}
