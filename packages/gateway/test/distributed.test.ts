// Four gateway processes sharing one store enforce one global limit exactly: on Redis and on a
// Redis Cluster, both started by the test. Requests go round-robin to all four.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import {
  type RedisCluster,
  type RedisServer,
  startCluster,
  startRedis,
} from '../../edgelimit/test/support/redis.js'
import { startUpstashBridge, type UpstashBridge } from '../../edgelimit/test/support/upstash-bridge.js'
import { farWindow } from '../../edgelimit/test/support/window.js'
import {
  burst,
  count,
  type Spawned,
  spawnGateway,
  startInProcess,
  tempDir,
  writePolicy,
} from './support/gateway.js'
import { type Origin, startOrigin } from './support/origin.js'

const LIMIT = 100
const GATEWAYS = 4
const REQUESTS = 400
/** The fixed windows' length: they count on Redis TIME, and a burst across an end would admit twice. */
const WINDOW = farWindow()

// A generous deadline: four processes and Redis share two cores here; a timed-out call would
// answer by onStoreError (closed: 503) and make the count wrong for a reason that is not the limit.
const policy = (store: string) => `
store: ${store}
identity: { secret: shared-secret }
defaults: { key: global, timeout: 5s }
rules:
  - { name: fw, match: { path: /fw }, algorithm: fixed-window, limit: ${LIMIT}, window: ${WINDOW} }
  - { name: sl, match: { path: /sl }, algorithm: sliding-log, limit: ${LIMIT}, window: 1h }
  - { name: tb, match: { path: /tb }, algorithm: token-bucket, capacity: ${LIMIT}, refillRate: 1, refillInterval: 1h }
  - { name: gcra, match: { path: /gcra }, algorithm: gcra, limit: ${LIMIT}, period: 1h }
`

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

async function fleet(store: string, env: Record<string, string> = {}): Promise<Spawned[]> {
  const file = writePolicy(tempDir(), policy(store))
  return Promise.all(
    Array.from({ length: GATEWAYS }, () =>
      spawnGateway(['--config', file, '--upstream', origin.url, '--no-watch', '-q'], { env }),
    ),
  )
}

async function exactlyTheLimit(gateways: Spawned[]): Promise<void> {
  for (const path of ['/fw', '/sl', '/tb', '/gcra']) {
    const statuses = await burst(REQUESTS, 32, async (i) => {
      const gateway = gateways[i % GATEWAYS] as Spawned
      const response = await fetch(`${gateway.url}${path}`)
      await response.arrayBuffer()
      return response.status
    })
    expect({ path, admitted: count(statuses, 200), limited: count(statuses, 429) }).toEqual({
      path,
      admitted: LIMIT,
      limited: REQUESTS - LIMIT,
    })
  }
  // Every gateway took part, and the store's latency is in its metrics.
  for (const gateway of gateways) {
    const metrics = await (await fetch(`${gateway.admin}/metrics`)).text()
    expect(metrics).toMatch(/edgelimit_decisions_total\{rule="fw",tier="",outcome="allowed"\} \d+/)
    expect(metrics).toMatch(/edgelimit_store_latency_seconds_count [1-9]\d*/)
    // No store error: each kind is there, at 0.
    for (const kind of ['error', 'timeout', 'breaker-open'])
      expect(metrics).toContain(`edgelimit_store_errors_total{kind="${kind}"} 0\n`)
  }
}

describe('one global limit across four gateways', () => {
  let redis: RedisServer | undefined
  let cluster: RedisCluster | undefined
  let gateways: Spawned[] = []
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()))
    await redis?.stop()
    await cluster?.stop()
  })

  test('on Redis: every algorithm admits exactly the limit', async () => {
    redis = await startRedis()
    gateways = await fleet(`\${REDIS_URL}`, { REDIS_URL: redis.url })
    await exactlyTheLimit(gateways)
    await Promise.all(gateways.map((g) => g.stop()))
    gateways = []
  })

  test('on a Redis Cluster: every algorithm admits exactly the limit', async () => {
    cluster = await startCluster()
    const nodes = cluster.nodes.map((n) => `${n.host}:${n.port}`)
    gateways = await fleet(`{ type: redis-cluster, nodes: [${nodes.join(', ')}] }`)
    await exactlyTheLimit(gateways)
  })
})

describe('Upstash (REST)', () => {
  let redis: RedisServer | undefined
  let bridge: UpstashBridge | undefined
  afterAll(async () => {
    await bridge?.close()
    await redis?.stop()
  })

  test('a gateway on the Upstash store enforces its limit (REST bridge in front of a real Redis)', async () => {
    redis = await startRedis()
    bridge = await startUpstashBridge(redis)
    const gw = await startInProcess(
      `
store: { type: upstash, url: "\${UPSTASH_URL}", token: "\${UPSTASH_TOKEN}" }
rules: [{ name: api, key: global, algorithm: gcra, limit: 2, period: 1h, timeout: 2s }]
`,
      { upstream: origin.url, env: { UPSTASH_URL: bridge.url, UPSTASH_TOKEN: bridge.token } },
    )
    try {
      const statuses = []
      for (let i = 0; i < 3; i++) statuses.push((await fetch(`${gw.url}/x`)).status)
      expect(statuses).toEqual([200, 200, 429])
    } finally {
      await gw.close()
    }
  })

  test('a script call whose connection resets after it ran is charged once, not retried', async () => {
    const redis = await startRedis()
    let resets = 0
    // The bridge runs the script, then resets the connection: the client sees a network error.
    const faulty = await startUpstashBridge(redis, {
      fault: ({ body }) => (JSON.stringify(body).includes('"evalsha"') && resets-- > 0 ? 'reset' : undefined),
    })
    const gw = await startInProcess(
      `
store: { type: upstash, url: "\${UPSTASH_URL}", token: "\${UPSTASH_TOKEN}" }
rules: [{ name: api, key: global, algorithm: fixed-window, limit: 3, window: ${WINDOW}, timeout: 2s }]
`,
      { upstream: origin.url, env: { UPSTASH_URL: faulty.url, UPSTASH_TOKEN: faulty.token } },
    )
    try {
      const statuses = [(await fetch(`${gw.url}/x`)).status]
      resets = 2
      for (let i = 0; i < 3; i++) statuses.push((await fetch(`${gw.url}/x`)).status)
      // The next two script calls each run once and fail (503, closed), charged once each: the
      // fourth request is the fourth charge. @upstash/redis retries a failed fetch (5 times by
      // default, once with `retry: false`), running the script again: [200, 429, 429, 429] and
      // [200, 503, 429, 429].
      expect(statuses).toEqual([200, 503, 503, 429])
    } finally {
      await gw.close()
      await faulty.close()
      await redis.stop()
    }
  })

  test('a request to Upstash that never answers is aborted after the store timeout: /admin/reset answers', async () => {
    const redis = await startRedis()
    let hang = false
    const faulty = await startUpstashBridge(redis, { fault: () => (hang ? 'hang' : undefined) })
    const gw = await startInProcess(
      `
admin: { token: admin-token }
store: { type: upstash, url: "\${UPSTASH_URL}", token: "\${UPSTASH_TOKEN}", timeout: 300ms }
rules: [{ name: api, key: global, algorithm: fixed-window, limit: 3, window: 1h, timeout: 2s }]
`,
      { upstream: origin.url, env: { UPSTASH_URL: faulty.url, UPSTASH_TOKEN: faulty.token } },
    )
    const reset = () =>
      Promise.race([
        fetch(`${gw.admin}/admin/reset`, {
          method: 'POST',
          headers: { authorization: 'Bearer admin-token' },
          body: JSON.stringify({ rule: 'api', path: '/x' }),
        }).then((r) => r.status),
        new Promise((resolve) => setTimeout(resolve, 5_000, 'no answer')),
      ])
    try {
      expect((await fetch(`${gw.url}/x`)).status).toBe(200)
      hang = true
      // The decision fails when its request is aborted (closed: 503), and so does the reset's DEL;
      // without a timeout on the client, both requests stayed open and every reset waited forever.
      expect((await fetch(`${gw.url}/x`)).status).toBe(503)
      expect(await reset()).toBe(503)
      hang = false
      expect(await reset()).toBe(200)
      expect((await fetch(`${gw.url}/x`)).status).toBe(200)
    } finally {
      await gw.close()
      await faulty.close()
      await redis.stop()
    }
  })
})
