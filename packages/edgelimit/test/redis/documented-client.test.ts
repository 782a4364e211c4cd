/**
 * The ioredis options the docs give (README.md, docs/**): a decision whose reply is lost with the
 * connection (the script ran) must not be written again after the reconnect, where the script
 * would charge a second time. Each options literal is read from the page and tried against a real
 * Redis behind a proxy that drops that reply and closes the client's connection.
 */
import { once } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter, fixedWindow } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { HOST, type RedisServer, startRedis } from '../support/redis.js'
import { farWindow } from '../support/window.js'

const root = join(import.meta.dirname, '..', '..', '..', '..')
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
]
/** `new Redis(process.env.REDIS_URL…, { … })` on each page: the options literal, as written. */
const documented = pages.flatMap((page) =>
  [
    ...readFileSync(join(root, page), 'utf8').matchAll(
      /new Redis\(process\.env\.REDIS_URL[^,]*, (\{[\s\S]*?\})\)/g,
    ),
  ].map((m, i) => ({
    where: `${page} #${i + 1}`,
    options: new Function(`return (${m[1]})`)() as RedisOptions,
  })),
)

/** A proxy to Redis that, once armed, forwards the next EVALSHA, drops its reply and hangs up. */
async function replyDropper(port: number) {
  let armed = false
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(port, HOST)
    let drop = false
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => {
        client.destroy()
        upstream.destroy()
      })
    }
    client.on('data', (chunk) => {
      if (armed && /evalsha/i.test(chunk.toString('latin1'))) {
        armed = false
        drop = true
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (drop) client.destroy()
      else client.write(chunk)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    arm: () => {
      armed = true
    },
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

let redis: RedisServer
let admin: Redis
beforeAll(async () => {
  redis = await startRedis()
  admin = new Redis({ host: redis.host, port: redis.port })
})
afterAll(async () => {
  admin?.disconnect()
  await redis?.stop()
})

describe('the ioredis options the docs give', () => {
  it('are found on the pages', () => {
    expect(documented.map((d) => d.where)).toEqual(
      expect.arrayContaining([
        'README.md #1',
        'docs/resilience.md #1',
        'docs/stores/redis.md #1',
        'docs/edge.md #1',
      ]),
    )
  })

  it.each(documented)(
    '$where: a decision whose reply is lost is charged once, not again after the reconnect',
    async ({ where, options }) => {
      const proxy = await replyDropper(redis.port)
      const client = new Redis(`redis://${HOST}:${proxy.port}`, options)
      client.on('error', () => {})
      // On Redis TIME, a window the test cannot cross the end of: the count must be the lost call's.
      const rules = [{ name: 'r', algorithm: fixedWindow({ limit: 100, window: farWindow() }) }]
      const prefix = `documented-${where}`
      try {
        if (options.lazyConnect) await client.connect()
        else if (client.status !== 'ready') await once(client, 'ready')
        const limiter = createLimiter({
          rules,
          store: redisStore({ client, prefix }),
          denyCache: false,
          breaker: false,
        })
        expect((await limiter.limit('k')).allowed).toBe(true)
        proxy.arm()
        // Its answer is the client's (a fallback, or a replay's): what counts is the store's count.
        await limiter.limit('k')
        // Back on a new connection, a command sent now is answered after anything written again.
        if (client.status !== 'ready') await once(client, 'ready')
        await client.ping()
        const store = createLimiter({ rules, store: redisStore({ client: admin, prefix }) })
        expect((await store.peek('k')).remaining).toBe(98)
      } finally {
        client.disconnect()
        await proxy.close()
      }
    },
  )
})
