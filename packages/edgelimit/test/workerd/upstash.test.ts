// The Redis store through @upstash/redis inside workerd, where every store call (a fetch) belongs
// to the request that made it and is cancelled when that request ends.
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import {
  type DelayProxy,
  type RedisServer,
  redisCommand,
  startDelayProxy,
  startRedis,
} from '../support/redis.js'
import { startUpstashBridge, type UpstashBridge } from '../support/upstash-bridge.js'
import { type Running, type StartOptions, startWorker } from './support/workerd.js'

let redis: RedisServer
let proxy: DelayProxy
let bridge: UpstashBridge
let worker: Running
/** While set, the bridge runs no EVAL (a script reload) and never answers it. */
let hangReloads = false
beforeAll(async () => {
  redis = await startRedis()
  // Every command takes 100 ms each way: a reset's DEL is in flight long enough to hold calls.
  proxy = await startDelayProxy(redis, 100)
  bridge = await startUpstashBridge(
    { host: redis.host, port: proxy.port },
    // @upstash/redis sends a command as a pipeline of one: [["eval", script, …]].
    { fault: ({ body }) => (hangReloads && /^\[+"eval"/i.test(JSON.stringify(body)) ? 'hang' : undefined) },
  )
  // The bridge's address and token, as wrangler's `vars` would give them (a plain Worker option).
  const vars = { bindings: { URL: bridge.url, TOKEN: bridge.token } } as StartOptions
  worker = await startWorker(join(import.meta.dirname, 'support', 'upstash-worker.ts'), vars)
})
afterAll(async () => {
  await worker?.dispose()
  await bridge?.close()
  await proxy?.close()
  await redis?.stop()
})

const get = async (path: string) => (await worker.fetch(path)).json()
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

it("decisions of other requests held behind a reset are answered by the store, not cancelled with the reset's request", async () => {
  await get('/limit?key=warm')
  // A reset, then, while its DEL travels, two requests whose decisions wait behind it: the reset's
  // own request sends them once the DEL has answered.
  const reset = get('/reset?key=gone')
  await sleep(30)
  const held = [get('/limit?key=a'), get('/limit?key=b')]
  expect(await reset).toEqual({ reset: true })
  // Decided by the store in time: the reset's request no longer answers (and ends, cancelling its
  // calls) before their batch has come back; they were answered by onStoreError at their deadline.
  const answers = (await Promise.all(held)) as { ms: number }[]
  expect(answers.map(({ ms, ...rest }) => rest)).toEqual([
    { allowed: true, remaining: 999, reason: null },
    { allowed: true, remaining: 999, reason: null },
  ])
  for (const { ms } of answers) expect(ms).toBeLessThan(2000)
  // Each was counted once.
  expect(await get('/limit?key=a')).toMatchObject({ allowed: true, remaining: 998 })
})

it('a script reload cancelled with its request (answered at its deadline) does not hold later decisions', async () => {
  await get('/limit?key=warm')
  await redisCommand(redis.port, ['SCRIPT', 'FLUSH'])
  // The first decision meets NOSCRIPT and sends the script, which the bridge neither runs nor
  // answers: the decision is answered at its 2 s deadline, and its request ends with the reload.
  hangReloads = true
  const started = Date.now()
  expect(await get('/limit?key=first')).toMatchObject({ allowed: false, reason: 'store-unavailable' })
  hangReloads = false
  // The next decisions meet NOSCRIPT too: each loads the script itself. They waited for that
  // reload, which never settles in workerd (not even at the client's 3 s timeout, a timer of the
  // cancelled request): every one was answered by onStoreError at its deadline, for ever.
  const next = (await get('/limit?key=next')) as { ms: number }
  expect(next).toMatchObject({ allowed: true, remaining: 999, reason: null })
  expect(next.ms).toBeLessThan(2000)
  // And past the client's timeout of the first reload (workerd's own timers: no clock to inject).
  await sleep(Math.max(0, started + 3500 - Date.now()))
  expect(await get('/limit?key=later')).toMatchObject({ allowed: true, remaining: 999, reason: null })
})
