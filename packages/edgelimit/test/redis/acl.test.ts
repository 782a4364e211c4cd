/**
 * The ACL docs/stores/redis.md gives for the store's Redis user is enough for every algorithm and
 * `reset`, and no command of it is spare: Redis 7 checks the commands a script calls against the
 * caller's ACL.
 */
import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createLimiter,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { redisFixture } from '../support/redis-client.js'
import { farWindow } from '../support/window.js'

const fixture = redisFixture()
const clients: Redis[] = []
afterAll(async () => {
  for (const client of clients) await client.quit()
})

const docs = readFileSync(new URL('../../../../docs/stores/redis.md', import.meta.url), 'utf8')
/** The documented `ACL SETUSER` line's permissions: the key pattern and the commands. */
const documented = /^ *ACL SETUSER edgelimit on >\S+ (.+)$/m.exec(docs)?.[1]?.split(' ') ?? []

// Both clocks are real ones (Redis TIME, the system clock): windows whose end this file's run
// cannot cross, or the counts asserted would start again.
const WINDOW = farWindow()
const algorithms = {
  fixed: fixedWindow({ limit: 5, window: WINDOW }),
  sliding: slidingWindow({ limit: 5, window: WINDOW }),
  log: slidingLog({ limit: 5, window: '1m' }),
  // One an hour: nothing refills or drains between a key's decisions, however slow the machine.
  token: tokenBucket({ capacity: 5, refillRate: 1, refillInterval: '1h' }),
  police: leakyBucket({ capacity: 5, leakRate: 1, leakInterval: '1h' }),
  shape: leakyBucket({ capacity: 5, leakRate: 1, leakInterval: '1h', mode: 'shape' }),
  gcra: gcra({ limit: 5, period: '1m' }),
}

let users = 0
/** A client of a new user with `permissions` (the prefix is `edgelimit`, the store's default). */
async function userWith(permissions: string[]): Promise<Redis> {
  const name = `rl${users++}`
  await fixture.client.acl('SETUSER', name, 'reset', 'on', '>pw', ...permissions)
  // ioredis's ready check runs INFO, which the user may not run.
  const client = new Redis({
    port: fixture.redis.port,
    username: name,
    password: 'pw',
    enableReadyCheck: false,
  })
  clients.push(client)
  return client
}

/**
 * Every algorithm decided three times and reset, on the clock given, the script not loaded yet;
 * the store errors met. The last two decisions share a batch, so a sliding log merges the second
 * into the first's instant (ZREM) on the server clock (one TIME per script call).
 */
async function exercise(client: Redis, clock: 'server' | 'client'): Promise<string[]> {
  await fixture.client.script('FLUSH')
  const errors: string[] = []
  const limiter = createLimiter({
    store: redisStore({ client, clock }),
    rules: Object.entries(algorithms).map(([name, algorithm]) => ({ name, algorithm })),
    timeout: '5s',
    breaker: false,
    denyCache: false,
    onEvent: (e) => {
      if (e.type === 'store-error') errors.push(String(e.error))
    },
  })
  const key = `u${users}`
  const ds = await Promise.all([limiter.limit(key), limiter.limit(key), limiter.limit(key)])
  const remaining = ds.map((d) => d.rules.map((r) => r.remaining))
  if (errors.length === 0) {
    expect(ds.every((d) => d.allowed)).toBe(true)
    // Each rule counted each decision (the shaping bucket queues the first without counting it).
    expect(remaining).toEqual([4, 3, 2].map((n) => [n, n, n, n, n, n + 1, n]))
  }
  try {
    await limiter.reset(key)
    const after = await limiter.limit(key)
    if (errors.length === 0) expect(after.rules.map((r) => r.remaining)).toEqual(remaining[0])
  } catch (error) {
    errors.push(String(error))
  }
  return errors
}

describe('the documented ACL', () => {
  it('is documented: the key pattern and the commands', () => {
    expect(documented[0]).toBe('~edgelimit:*')
    expect(documented.slice(1).every((p) => /^\+[a-z]+$/.test(p))).toBe(true)
    expect(documented).toContain('+time')
  })

  it('runs every algorithm and reset, on the server clock and on the client clock without +time', async () => {
    expect(await exercise(await userWith(documented), 'server')).toEqual([])
    expect(await exercise(await userWith(documented.filter((p) => p !== '+time')), 'client')).toEqual([])
  })

  it('has no spare command: without any one of them something fails', async () => {
    for (const permission of documented.slice(1)) {
      const errors = await exercise(await userWith(documented.filter((p) => p !== permission)), 'server')
      expect(errors.length, `without ${permission}`).toBeGreaterThan(0)
    }
  })
})
