// The Redis store over @upstash/redis when the REST endpoint misbehaves: a request that never
// answers, an error answer after the script ran, a reply that is not the script's.
import { Redis as Upstash } from '@upstash/redis'
import { describe, expect, it } from 'vitest'
import { createLimiter, fixedWindow, type LimiterEvent } from '../../src/index.js'
import { redisStore } from '../../src/redis.js'
import { upstashFixture } from '../support/redis-client.js'
import type { BridgeFault, BridgeRequest } from '../support/upstash-bridge.js'
import { farWindow } from '../support/window.js'

// The fault for the next requests, as the test sets it.
let fault: (request: BridgeRequest) => BridgeFault | undefined = () => undefined
const fixture = upstashFixture({ fault: (request) => fault(request) })

/** A client of the bridge; `enableAutoPipelining` as given, the client's default when omitted. */
const client = (enableAutoPipelining?: boolean) =>
  new Upstash({
    url: fixture.bridge.url,
    token: fixture.bridge.token,
    enableTelemetry: false,
    retry: { retries: 0 },
    ...(enableAutoPipelining === undefined ? {} : { enableAutoPipelining }),
  })

/** A request whose commands mention the client key `key`. */
const about = (key: string) => (request: BridgeRequest) => JSON.stringify(request.body).includes(`{${key}}`)

/** On Redis TIME: a window this file's run cannot cross the end of, so a charge is still counted. */
const WINDOW = farWindow()

const limiterOn = (prefix: string, events: LimiterEvent[] = [], timeout: '1s' | '500ms' | '300ms' = '1s') =>
  createLimiter({
    rules: [{ name: 'fw', algorithm: fixedWindow({ limit: 10, window: WINDOW }), onStoreError: 'open' }],
    store: redisStore({ client: client(), prefix }),
    timeout,
    breaker: false,
    denyCache: false,
    onEvent: (e) => events.push(e),
  })

describe('reset', () => {
  it('a request that never answers does not hold later resets past the deadline', async () => {
    const limiter = limiterOn('hung', [], '300ms')
    await limiter.limit('k')
    fault = (request) => (about('h')(request) ? 'hang' : undefined)
    // Answered at its deadline by onStoreError; its request stays open.
    expect((await limiter.limit('h')).allowed).toBe(true)
    const outcome = () =>
      Promise.race([
        limiter.reset('k').then(() => 'reset'),
        new Promise((resolve) => setTimeout(resolve, 5_000, 'still waiting')),
      ])
    expect(await outcome()).toBe('reset')
    expect((await limiter.peek('k')).remaining).toBe(10)
    expect(await outcome()).toBe('reset')
    fault = () => undefined
  })

  it('calls held behind a reset that never answer hold it no longer than its own deadline', async () => {
    const limiter = limiterOn('held', [], '500ms')
    await limiter.limit('warm')
    // The reset's DEL never answers, nor does the decision issued after it (held until the DEL
    // has answered or timed out, then sent).
    fault = (request) => (about('gone')(request) || about('late')(request) ? 'hang' : undefined)
    const start = performance.now()
    const reset = limiter.reset('gone').then(
      () => 'reset',
      (error: { code?: string }) => error.code,
    )
    const late = limiter.limit('late')
    expect(await reset).toBe('ERR_EDGELIMIT_TIMEOUT')
    const took = performance.now() - start
    // Answered by onStoreError at its own deadline.
    expect((await late).allowed).toBe(true)
    fault = () => undefined
    // One deadline (500 ms) for the DEL and the calls it released, not one each (1 s).
    expect(took).toBeLessThan(800)
  })
})

describe('NOSCRIPT', () => {
  it('an error after the script ran is not NOSCRIPT because the key says so: charged once', async () => {
    const events: LimiterEvent[] = []
    const limiter = limiterOn('noscript', events)
    await limiter.limit('warm')
    for (const key of ['alice', 'NOSCRIPT-alice']) {
      let faults = 1
      // A proxy in front of the endpoint times out after the script ran; @upstash/redis puts the
      // request body, client key included, into the error's message.
      fault = (request) =>
        about(key)(request) && faults-- > 0 ? { status: 504, body: '{"error":"gateway timeout"}' } : undefined
      const d = await limiter.limit(key)
      // Answered by onStoreError (open), after the one failed call.
      expect([key, d.allowed, events.filter((e) => e.type === 'store-error').length]).toEqual([key, true, 1])
      events.length = 0
      expect([key, (await limiter.peek(key)).remaining]).toEqual([key, 9])
    }
    fault = () => undefined
  })

  it.each([true, false])(
    'a real NOSCRIPT (SCRIPT FLUSH) is recovered, enableAutoPipelining: %s',
    async (auto) => {
      const upstash = client(auto)
      const limiter = createLimiter({
        rules: [{ name: 'fw', algorithm: fixedWindow({ limit: 10, window: WINDOW }) }],
        store: redisStore({ client: upstash, prefix: `flush-${auto}` }),
        timeout: false,
        breaker: false,
        denyCache: false,
      })
      await limiter.limit('k')
      await upstash.scriptFlush()
      const d = await limiter.limit('k')
      expect([d.allowed, d.remaining]).toEqual([true, 8])
    },
  )
})

describe('a reply that is not the script’s', () => {
  it.each([
    '[{"result":["x","y","z","w"]}]',
    '[{"result":[7,1,1,1]}]',
    '[{"result":[0,null,5,0]}]',
    // Numbers the script never sends: negative, fractional or beyond 2^53, -1 (never) but for a
    // cost above the limit.
    '[{"result":[0,-3,1,0]}]',
    '[{"result":[0,1e300,1,0]}]',
    '[{"result":[0,1.5,1,0]}]',
    '[{"result":[0,1,-5,0]}]',
    '[{"result":[0,1,9007199254740993,0]}]',
    '[{"result":[0,1,1,-2]}]',
    '[{"result":[0,1,1,-1]}]',
    '[{"result":[1,0,1,-1]}]',
    '[{"result":[1,0,1,0.5]}]',
    '[{"result":[0.5,1,1,0]}]',
  ])('%s is a store error (ERR_EDGELIMIT_STORE), answered by onStoreError', async (body) => {
    const events: LimiterEvent[] = []
    const limiter = limiterOn('malformed', events)
    await limiter.limit('warm')
    fault = (request) => (about('bad')(request) ? { status: 200, body } : undefined)
    const d = await limiter.limit('bad')
    fault = () => undefined
    expect([d.allowed, d.reason, d.remaining]).toEqual([true, undefined, 0])
    const errors = events.flatMap((e) => (e.type === 'store-error' ? [e.error] : []))
    expect(errors).toEqual([expect.objectContaining({ code: 'ERR_EDGELIMIT_STORE' })])
  })
})

describe('an error answer on the decision path', () => {
  it('reaches store-error as ERR_EDGELIMIT_STORE, the client error its cause, no client key in the message', async () => {
    const events: LimiterEvent[] = []
    const limiter = limiterOn('errored', events)
    await limiter.limit('warm')
    fault = (request) =>
      about('secret-client')(request) ? { status: 500, body: '{"error":"ERR internal"}' } : undefined
    const d = await limiter.limit('secret-client')
    fault = () => undefined
    expect([d.allowed, d.reason]).toEqual([true, undefined])
    const errors = events.flatMap((e) => (e.type === 'store-error' ? [e.error] : []))
    expect(errors).toHaveLength(1)
    const error = errors[0] as Error & { code?: string; cause?: unknown }
    expect(error.code).toBe('ERR_EDGELIMIT_STORE')
    expect(error.message).toMatch(/ERR internal/)
    // @upstash/redis appends the request (`, command was: [...]`, the store keys in it).
    expect(error.message).not.toMatch(/secret-client|command was/)
    expect(error.cause).toBeInstanceOf(Error)
    expect(String((error.cause as Error).message)).toMatch(/secret-client/)
  })

  it.each([false, true])(
    'a failed reset says why, without the client key, enableAutoPipelining: %s',
    async (auto) => {
      const upstash = client(auto)
      const limiter = createLimiter({
        rules: [{ name: 'fw', algorithm: fixedWindow({ limit: 10, window: WINDOW }) }],
        store: redisStore({ client: upstash, prefix: `reset-${auto}` }),
        timeout: '1s',
        breaker: false,
      })
      await limiter.limit('warm')
      fault = (request) =>
        about('secret-reset')(request) ? { status: 500, body: '{"error":"ERR internal"}' } : undefined
      const error = (await limiter.reset('secret-reset').catch((e: unknown) => e)) as Error & {
        code?: string
        cause?: unknown
      }
      fault = () => undefined
      expect(error.code).toBe('ERR_EDGELIMIT_STORE')
      expect(error.message).toBe('reset failed: ERR internal')
      expect(String((error.cause as Error).message)).toMatch(/secret-reset/)
    },
  )
})
