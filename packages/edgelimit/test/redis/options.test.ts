/**
 * redisStore's options, checked when the store is created (and a rule name when a limiter binds
 * it): every problem in one ConfigError, each with its path and code, as createLimiter reports.
 */
import { describe, expect, it } from 'vitest'
import { ConfigError, createLimiter, fixedWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { redisFixture } from '../support/redis-client.js'

const fixture = redisFixture()

function issuesOf(make: () => unknown): Record<string, string[]> {
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

describe('redisStore options', () => {
  it('reports every invalid option at once, with its path', () => {
    expect(
      issuesOf(() =>
        redisStore({
          client: undefined,
          prefix: 'a{b',
          maxBatch: 0,
          clock: 'local' as never,
          coalesce: 1 as never,
        }),
      ),
    ).toEqual({
      client: ['ERR_CLIENT'],
      prefix: ['ERR_PREFIX'],
      maxBatch: ['ERR_INTEGER'],
      clock: ['ERR_CHOICE'],
      coalesce: ['ERR_BOOLEAN'],
    })
    expect(issuesOf(() => redisStore({ client: {} }))).toEqual({ client: ['ERR_CLIENT'] })
    expect(issuesOf(() => redisStore({ client: fixture.client, maxBatch: 1.5 }))).toEqual({
      maxBatch: ['ERR_INTEGER'],
    })
    expect(issuesOf(() => redisStore(undefined as never))).toEqual({ options: ['ERR_OBJECT'] })
  })

  it('a rule name with a brace is a ConfigError at that rule, when the limiter is created', () => {
    const store = redisStore({ client: fixture.client, prefix: 'opts' })
    const rule = (name: string) => ({ name, algorithm: fixedWindow({ limit: 1, window: '1m' }) })
    expect(issuesOf(() => createLimiter({ rules: [rule('ok'), rule('a{b'), rule('c}')], store }))).toEqual({
      'rules[1].name': ['ERR_RULE_NAME'],
      'rules[2].name': ['ERR_RULE_NAME'],
    })
  })

  it('valid options make a working store', async () => {
    const store = redisStore({ client: fixture.client, prefix: 'opts', maxBatch: 1, clock: 'client' })
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1m' }) }],
      store,
    })
    expect([(await limiter.limit('k')).allowed, (await limiter.limit('k')).allowed]).toEqual([true, false])
  })
})
