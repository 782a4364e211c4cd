/**
 * redisStore's options, checked when the store is created (and a rule name when a limiter binds
 * it): every problem in one ConfigError, each with its path and code, as createLimiter reports.
 */
import { Cluster, type ClusterOptions, Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createLimiter, fixedWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { issuesOf } from '../support/config-issues.js'
import { redisFixture } from '../support/redis-client.js'
import { stateKey } from '../support/state-key.js'
import { farWindow } from '../support/window.js'

const fixture = redisFixture()
/**
 * A window this file's run cannot cross the end of, for the tests that count twice on a clock they
 * cannot set (Redis TIME, or the system clock): a crossing between two calls would admit both.
 */
const WINDOW = farWindow()

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

  it('refuses an option name it does not know (a misspelling from a config file)', () => {
    const options = { client: fixture.client, prefix: 'opts', maxbatch: 4, coalesce: false, clockk: 'client' }
    expect(issuesOf(() => redisStore(options as never))).toEqual({
      maxbatch: ['ERR_UNKNOWN_OPTION'],
      clockk: ['ERR_UNKNOWN_OPTION'],
    })
    expect(() => redisStore(options as never)).toThrow(
      'maxbatch: expected one of client, prefix, clock, coalesce, maxBatch, got "maxbatch" (string) [ERR_UNKNOWN_OPTION]',
    )
  })

  it('a rule name with a brace is a ConfigError at that rule, when the limiter is created', () => {
    const store = redisStore({ client: fixture.client, prefix: 'opts' })
    const rule = (name: string) => ({ name, algorithm: fixedWindow({ limit: 1, window: '1m' }) })
    expect(issuesOf(() => createLimiter({ rules: [rule('ok'), rule('a{b'), rule('c}')], store }))).toEqual({
      'rules[1].name': ['ERR_RULE_NAME'],
      'rules[2].name': ['ERR_RULE_NAME'],
    })
  })

  it("an ioredis Cluster's keyPrefix with a brace is a ConfigError at client.options.keyPrefix", async () => {
    // The keyPrefix comes first in every key: a brace in it moves the hash tag off the client key.
    const cluster = (options: ClusterOptions) =>
      new Cluster([{ host: fixture.redis.host, port: fixture.redis.port }], { lazyConnect: true, ...options })
    for (const keyPrefix of ['app{', '{app}:', 'a}b:']) {
      expect(issuesOf(() => redisStore({ client: cluster({ keyPrefix }), prefix: 'a{' }))).toEqual({
        prefix: ['ERR_PREFIX'],
        'client.options.keyPrefix': ['ERR_KEY_PREFIX'],
      })
      // Given in redisOptions, ioredis uses it as the Cluster's own.
      expect(issuesOf(() => redisStore({ client: cluster({ redisOptions: { keyPrefix } }) }))).toEqual({
        'client.options.keyPrefix': ['ERR_KEY_PREFIX'],
      })
    }
    expect(() => redisStore({ client: cluster({ keyPrefix: 'app{' }) })).toThrow(
      'client.options.keyPrefix: expected a key prefix without braces on a Cluster',
    )
    expect(() => redisStore({ client: cluster({ keyPrefix: 'app:' }) })).not.toThrow()
    // Without a Cluster a brace moves nothing: a standalone client keeps its keyPrefix.
    const standalone = new Redis({ port: fixture.redis.port, keyPrefix: 'app{', lazyConnect: true })
    const spec = fixedWindow({ limit: 1, window: WINDOW })
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: spec }],
      store: redisStore({ client: standalone, prefix: 'kpx' }),
      // The first decision connects (lazyConnect) and loads the script: more than 45 ms on a busy machine.
      timeout: '5s',
    })
    const first = await limiter.limit('k')
    expect([first.allowed, first.reason, (await limiter.limit('k')).allowed]).toEqual([
      true,
      undefined,
      false,
    ])
    expect(await fixture.client.exists(`app{${stateKey('kpx', 'r', spec, 'k')}`)).toBe(1)
    await standalone.quit()
  })

  it('valid options make a working store', async () => {
    const store = redisStore({ client: fixture.client, prefix: 'opts', maxBatch: 1, clock: 'client' })
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: WINDOW }) }],
      store,
    })
    const first = await limiter.limit('k')
    expect([first.allowed, first.reason, (await limiter.limit('k')).allowed]).toEqual([
      true,
      undefined,
      false,
    ])
  })
})

describe('redisStore keys', () => {
  const limiter = (prefix: string, name: string) =>
    createLimiter({
      rules: [{ name, algorithm: fixedWindow({ limit: 3, window: WINDOW }) }],
      store: redisStore({ client: fixture.client, prefix }),
      timeout: false,
      breaker: false,
      denyCache: false,
    })

  it('a colon in a rule name is escaped: prefix `api` + rule `v2:login` is not prefix `api:v2` + rule `login`', async () => {
    const a = limiter('kc', 'v2:login')
    const b = limiter('kc:v2', 'login')
    for (let i = 0; i < 3; i++) expect((await a.limit('alice')).allowed).toBe(true)
    expect((await a.limit('alice')).allowed).toBe(false)
    // B has counted nothing for alice.
    expect((await b.limit('alice')).remaining).toBe(2)
    const spec = fixedWindow({ limit: 3, window: WINDOW })
    const keys = [stateKey('kc', 'v2:login', spec, 'alice'), stateKey('kc:v2', 'login', spec, 'alice')]
    expect(keys[0]).toMatch(/^kc:v2%3Alogin:\w+:\{alice\}$/)
    expect(keys[1]).toMatch(/^kc:v2:login:\w+:\{alice\}$/)
    expect(await fixture.client.exists(keys)).toBe(2)
  })

  it('so is a percent sign, so that escaped and plain names stay apart; other names keep their keys', async () => {
    const colon = limiter('kp', 'a:b')
    const escaped = limiter('kp', 'a%3Ab')
    expect((await colon.limit('k')).remaining).toBe(2)
    expect((await escaped.limit('k')).remaining).toBe(2)
    const spec = fixedWindow({ limit: 3, window: WINDOW })
    const [colonKey, escapedKey] = [stateKey('kp', 'a:b', spec, 'k'), stateKey('kp', 'a%3Ab', spec, 'k')]
    expect(escapedKey).toMatch(/^kp:a%253Ab:\w+:\{k\}$/)
    expect(await fixture.client.exists(colonKey, escapedKey)).toBe(2)
    // A prefix with colons (`myapp:rl`) and a plain rule name: the key as it always was.
    const plain = limiter('myapp:rl', 'login-v2.tier_1')
    await plain.limit('k')
    const plainKey = stateKey('myapp:rl', 'login-v2.tier_1', spec, 'k')
    expect(plainKey).toMatch(/^myapp:rl:login-v2\.tier_1:\w+:\{k\}$/)
    expect(await fixture.client.exists(plainKey)).toBe(1)
    await plain.reset('k')
    await colon.reset('k')
    expect(await fixture.client.exists(plainKey, colonKey)).toBe(0)
  })
})
