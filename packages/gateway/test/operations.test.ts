// Operations: health, metrics, the admin API and its token, hot reload under load.
import { writeFileSync } from 'node:fs'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { manualClock } from 'edgelimit/testing'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startRedis } from '../../edgelimit/test/support/redis.js'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { burst, type InProcess, rawRequest, startInProcess } from './support/gateway.js'
import { arrival, type Origin, startOrigin } from './support/origin.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

/**
 * The fixed windows' length where a test counts: they count on the system clock, and a test that
 * spanned the end of one (an hour's at XX:00:00) would see its count start again.
 */
const WINDOW = farWindow()

const RULES = `
identity: { secret: test }
rules:
  - { name: login, match: { path: /login, methods: [POST] }, algorithm: sliding-log, limit: 3, window: 1m }
  - name: api
    match: { path: /api/** }
    key: header:x-api-key
    algorithm: token-bucket
    refillRate: 1
    refillInterval: 1h
    tiers: { keys: { vip: pro }, default: free, plans: { free: { capacity: 2 }, pro: { capacity: 4 } } }
  - { name: trial, match: { path: /trial }, algorithm: fixed-window, limit: 1, window: ${WINDOW}, mode: shadow }
`

describe('health and metrics', () => {
  let gw: InProcess
  beforeAll(async () => {
    gw = await startInProcess(RULES, { upstream: origin.url })
  })
  afterAll(() => gw?.close())

  test('/healthz and /readyz answer on the admin port, not on the proxy port', async () => {
    expect(await (await fetch(`${gw.admin}/healthz`)).json()).toEqual({ status: 'ok' })
    const ready = await fetch(`${gw.admin}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toMatchObject({
      ready: true,
      generation: 1,
      store: { type: 'memory', status: 'ready' },
    })
    // The proxy port forwards these paths like any other.
    expect(((await (await fetch(`${gw.url}/healthz`)).json()) as { url: string }).url).toBe('/healthz')
  })

  test('/metrics: decisions by rule and outcome, shadow would-block, upstream status, responses', async () => {
    for (let i = 0; i < 4; i++) await (await fetch(`${gw.url}/login`, { method: 'POST' })).arrayBuffer()
    for (let i = 0; i < 2; i++) await (await fetch(`${gw.url}/trial`)).arrayBuffer()
    await (await fetch(`${gw.url}/api/x`, { headers: { 'x-api-key': 'vip' } })).arrayBuffer()
    const response = await fetch(`${gw.admin}/metrics`)
    expect(response.headers.get('content-type')).toContain('text/plain')
    const text = await response.text()
    for (const line of [
      'edgelimit_decisions_total{rule="login",tier="",outcome="allowed"} 3',
      'edgelimit_decisions_total{rule="login",tier="",outcome="denied"} 1',
      'edgelimit_decisions_total{rule="trial",tier="",outcome="shadow_denied"} 1',
      'edgelimit_decisions_total{rule="api",tier="pro",outcome="allowed"} 1',
      'edgelimit_shadow_would_block_total{rule="trial",tier=""} 1',
      'edgelimit_upstream_responses_total{code="200"} 7',
      'edgelimit_responses_total{code="429"} 1',
      'edgelimit_config_generation 1',
      'edgelimit_in_flight_requests 0',
    ]) {
      expect(text).toContain(line)
    }
    // Every answered request is timed once, whatever its outcome (429 included): these 7 and the
    // /healthz of the test before, through the proxy port.
    expect(text).toContain('# TYPE edgelimit_request_duration_seconds histogram')
    expect(text).toContain('edgelimit_request_duration_seconds_bucket{le="+Inf"} 8')
    expect(text).toContain('edgelimit_request_duration_seconds_count 8')
    expect(Number(/^edgelimit_request_duration_seconds_sum (\S+)$/m.exec(text)?.[1])).toBeGreaterThan(0)
    expect(text).toContain('# TYPE edgelimit_store_latency_seconds histogram')
    expect(text).toContain('# TYPE edgelimit_breaker_state gauge')
    expect(text).toContain('# TYPE edgelimit_store_errors_total counter')
  })

  test('without a token the admin API is off (404)', async () => {
    const response = await fetch(`${gw.admin}/admin/rules`)
    expect(response.status).toBe(404)
    expect(((await response.json()) as { detail: string }).detail).toContain('admin API is off')
  })
})

describe('admin API with a bearer token', () => {
  let gw: InProcess
  const TOKEN = 's3cret-token'
  const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }
  beforeAll(async () => {
    gw = await startInProcess(`admin: { token: "\${TEST_ADMIN_TOKEN}" }\n${RULES}`, {
      upstream: origin.url,
      env: { TEST_ADMIN_TOKEN: TOKEN },
    })
  })
  afterAll(() => gw?.close())

  test('no token or a wrong one: 401 with WWW-Authenticate', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: `Basic ${TOKEN}` },
    ]
    for (const headers of attempts) {
      const response = await fetch(`${gw.admin}/admin/rules`, { headers })
      expect(response.status).toBe(401)
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="edgelimit admin"')
    }
    expect(
      (await fetch(`${gw.admin}/admin/reset`, { method: 'POST', body: '{"rule":"login","ip":"127.0.0.1"}' }))
        .status,
    ).toBe(401)
  })

  test('rules, peek and reset a key described as a request', async () => {
    const rules = (await (await fetch(`${gw.admin}/admin/rules`, { headers: auth })).json()) as {
      rules: { name: string }[]
    }
    expect(rules.rules.map((r) => r.name)).toEqual(['login', 'api', 'trial'])
    for (let i = 0; i < 3; i++) await (await fetch(`${gw.url}/login`, { method: 'POST' })).arrayBuffer()
    expect((await fetch(`${gw.url}/login`, { method: 'POST' })).status).toBe(429)
    const who = JSON.stringify({ rule: 'login', ip: '127.0.0.1', method: 'POST', path: '/login' })
    const peek = (await (
      await fetch(`${gw.admin}/admin/peek`, { method: 'POST', headers: auth, body: who })
    ).json()) as {
      key: string
      plans: { decision: { admitsNext: boolean; remaining: number } }[]
    }
    expect(peek.plans[0]?.decision).toMatchObject({ admitsNext: false, remaining: 0, limit: 3 })
    const reset = await fetch(`${gw.admin}/admin/reset`, { method: 'POST', headers: auth, body: who })
    expect(await reset.json()).toEqual({ rule: 'login', key: peek.key, reset: ['login'] })
    expect((await fetch(`${gw.url}/login`, { method: 'POST' })).status).toBe(200)
    expect(gw.logs.some((l) => l.msg === 'admin: key reset' && l.rule === 'login')).toBe(true)
  })

  test('peek a tiered key: the tier comes from the key lookup, as for requests', async () => {
    for (let i = 0; i < 3; i++)
      await (await fetch(`${gw.url}/api/x`, { headers: { 'x-api-key': 'vip' } })).arrayBuffer()
    const body = JSON.stringify({ rule: 'api', headers: { 'x-api-key': 'vip' } })
    const peek = (await (
      await fetch(`${gw.admin}/admin/peek`, { method: 'POST', headers: auth, body })
    ).json()) as {
      plans: { tier: string; decision: { remaining: number; limit: number } }[]
    }
    expect(peek.plans).toEqual([
      { tier: 'pro', name: 'api.pro', decision: expect.objectContaining({ limit: 4, remaining: 1 }) },
    ])
  })

  test('reset by the key a shadow log line shows', async () => {
    await (await fetch(`${gw.url}/trial`)).arrayBuffer()
    await (await fetch(`${gw.url}/trial`)).arrayBuffer()
    const line = gw.logs.find((l) => l.msg === 'shadow: would block' && l.rule === 'trial')
    expect(line).toBeDefined()
    const body = JSON.stringify({ rule: 'trial', key: line?.key })
    const before = (await (
      await fetch(`${gw.admin}/admin/peek`, { method: 'POST', headers: auth, body })
    ).json()) as {
      plans: { decision: { remaining: number } }[]
    }
    expect(before.plans[0]?.decision.remaining).toBe(0)
    await fetch(`${gw.admin}/admin/reset`, { method: 'POST', headers: auth, body })
    const after = (await (
      await fetch(`${gw.admin}/admin/peek`, { method: 'POST', headers: auth, body })
    ).json()) as {
      plans: { decision: { remaining: number } }[]
    }
    expect(after.plans[0]?.decision.remaining).toBe(1)
  })

  test('a body that is not a JSON object: 400 problem saying so', async () => {
    for (const [body, detail] of [
      ['null', /not an object/],
      ['[1]', /not an object/],
      ['"login"', /not an object/],
      ['{"rule":', /not JSON/],
    ] as const) {
      const response = await fetch(`${gw.admin}/admin/peek`, { method: 'POST', headers: auth, body })
      expect(response.status).toBe(400)
      expect(((await response.json()) as { detail: string }).detail).toMatch(detail)
    }
  })

  test('a body over 64 KiB: 413 problem+json, then the connection closes', async () => {
    for (const [bytes, headers] of [
      [70_000, {}],
      [4_000_000, {}],
      [70_000, { 'transfer-encoding': 'chunked' }],
      [4_000_000, { 'transfer-encoding': 'chunked' }],
    ] as const) {
      const response = await rawRequest(`${gw.admin}/admin/peek`, {
        method: 'POST',
        headers: { ...auth, ...headers },
        body: Buffer.alloc(bytes, 'a'),
      })
      expect(response.status).toBe(413)
      expect(response.headers['content-type']).toBe('application/problem+json')
      expect(response.headers.connection).toBe('close')
      expect(JSON.parse(response.body.toString())).toMatchObject({
        status: 413,
        detail: 'the body is larger than 64 KiB',
        instance: '/admin/peek',
      })
    }
  })

  test('unknown rule: 404 problem naming the rules', async () => {
    const response = await fetch(`${gw.admin}/admin/peek`, {
      method: 'POST',
      headers: auth,
      body: '{"rule":"nope"}',
    })
    expect(response.status).toBe(404)
    expect(((await response.json()) as { detail: string }).detail).toContain('login, api, trial')
  })
})

describe('hot reload', () => {
  const policy = (loginLimit: number, extra = '') => `
rules:
  - { name: counted, match: { path: /counted/** }, key: global, algorithm: sliding-log, limit: 1000000, window: 1h }
  - { name: login, match: { path: /login }, algorithm: fixed-window, limit: ${loginLimit}, window: ${WINDOW} }
${extra}`

  test('under load: zero failed requests; unchanged rules keep their counters; an invalid file is rejected and logged', async () => {
    const gw = await startInProcess(policy(100), { upstream: origin.url, watch: true })
    try {
      let stop = false
      const failures: string[] = []
      let sent = 0
      const worker = async () => {
        while (!stop) {
          try {
            const response = await fetch(`${gw.url}/counted/x`)
            await response.arrayBuffer()
            sent++
            if (response.status !== 200) failures.push(String(response.status))
          } catch (error) {
            failures.push((error as Error).message)
          }
        }
      }
      const load = Promise.all(Array.from({ length: 8 }, worker))
      // Waits for what the gateway does, not for a time: a reload is the watcher's 100 ms debounce
      // plus a policy build, in this process, beside 8 request loops; on a loaded 2-core machine
      // that took over 2 s. A reload that never comes still fails here, after 15 s.
      const waitFor = async (test: () => boolean) => {
        for (let i = 0; i < 750 && !test(); i++) await new Promise((r) => setTimeout(r, 20))
        expect(test()).toBe(true)
      }
      const reloads = () => gw.logs.filter((l) => l.msg === 'policy reloaded').length
      const rejections = () => gw.logs.filter((l) => l.msg.startsWith('policy rejected')).length
      // Valid edits, picked up from the file watcher while requests keep flowing.
      for (let i = 1; i <= 3; i++) {
        await new Promise((r) => setTimeout(r, 100))
        writeFileSync(gw.file, policy(100 + i))
        await waitFor(() => reloads() === i)
      }
      expect(gw.gateway.generation).toBe(4)
      // An invalid edit: rejected, logged with its problems, generation 4 stays in force.
      writeFileSync(gw.file, policy(5, '  - { name: broken, algorithm: gcra, limit: 0, period: 1s }'))
      await waitFor(() => rejections() === 1)
      const rejected = gw.logs.find((l) => l.msg.startsWith('policy rejected'))
      expect(rejected?.issues).toEqual([
        expect.stringMatching(/edgelimit\.yaml:5:\d+ {2}rules\[2\]\.limit: expected a positive integer/),
      ])
      expect(gw.gateway.generation).toBe(4)
      // Explicit reloads too (what SIGHUP does).
      writeFileSync(gw.file, policy(7))
      const result = await gw.gateway.reload('test')
      expect(result.ok).toBe(true)
      await new Promise((r) => setTimeout(r, 200))
      // A count, not a time: the zero failures below are over at least 50 requests sent while the
      // policy changed, however slowly the loaded machine served them (not 50 within ~0.5 s).
      await waitFor(() => sent > 50)
      stop = true
      await load
      expect(failures).toEqual([])
      expect(sent).toBeGreaterThan(50)
      // The unchanged rule kept its limiter through 5 reloads: it counted every request.
      expect(gw.gateway.config.rules.map((r) => r.name)).toEqual(['counted', 'login'])
      const response = await fetch(`${gw.url}/counted/last`)
      expect(response.headers.get('ratelimit')).toBe(`"counted";r=${1_000_000 - sent - 1};t=3600`)
      // The changed rule runs with its new limit: 7.
      const logins = []
      for (let i = 0; i < 8; i++) logins.push((await fetch(`${gw.url}/login`)).status)
      expect(logins).toEqual([200, 200, 200, 200, 200, 200, 200, 429])
      const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
      expect(metrics).toContain('edgelimit_config_reloads_total{result="success"} 4')
      expect(metrics).toContain('edgelimit_config_reloads_total{result="failure"} 1')
      expect(metrics).toContain('edgelimit_config_generation 5')
    } finally {
      await gw.close()
    }
  })

  test('in-flight requests finish on the policy and upstream they started with', async () => {
    const other = await startOrigin()
    const gw = await startInProcess(policy(100), { upstream: undefined, watch: false })
    try {
      writeFileSync(gw.file, `upstream: ${origin.url}\n${policy(100)}`)
      await gw.gateway.reload()
      // The reload comes once the request has reached the first upstream (not 100 ms after it was
      // sent: on a loaded machine it had not, went to the second upstream, and the count failed).
      const arrived = arrival(origin, '/slow')
      const slow = fetch(`${gw.url}/slow?ms=400`)
      await arrived
      writeFileSync(gw.file, `upstream: ${other.url}\n${policy(100)}`)
      expect((await gw.gateway.reload()).ok).toBe(true)
      const response = await slow
      expect(response.status).toBe(200)
      expect(await response.text()).toBe('slow done')
      await (await fetch(`${gw.url}/echo`)).arrayBuffer()
      expect(other.requests).toBe(1)
    } finally {
      await gw.close()
      await other.close()
    }
  })

  test('a reload that changes a rule frees the keys of the limiter it retires (memory store)', async () => {
    const policy = (limit: number) => `
rules:
  - { name: per-key, key: header:x-key, algorithm: fixed-window, limit: ${limit}, window: 1h }
`
    const gw = await startInProcess(policy(100), { upstream: origin.url })
    const send = () =>
      burst(300, 8, async (i) => (await fetch(gw.url, { headers: { 'x-key': `k${i}` } })).status)
    const keys = async () => {
      // A WeakRef's target lives until the job that read it ends: collect on a later task.
      await new Promise((resolve) => setImmediate(resolve))
      gc()
      const text = await (await fetch(`${gw.admin}/metrics`)).text()
      return Number(/^edgelimit_memory_store_keys (\d+)$/m.exec(text)?.[1])
    }
    try {
      expect(await send()).toEqual(new Array(300).fill(200))
      expect(await keys()).toBe(300)
      for (const limit of [101, 102, 103]) {
        writeFileSync(gw.file, policy(limit))
        expect((await gw.gateway.reload('test')).ok).toBe(true)
        await send()
      }
      // Only the limiter in force holds keys (kept for good before: 1,200 after three reloads).
      expect(await keys()).toBe(300)
    } finally {
      await gw.close()
    }
  })

  test("a reload that removes a rule or a tier removes its breaker's gauge and dashboard entry; a rule kept or changed keeps them", async () => {
    const redis = await startRedis()
    const onRedis = (rules: string) => `
store: ${redis.url}
identity: { secret: test }
rules:
${rules}`
    const fragile =
      '  - { name: fragile, match: { path: /f/** }, key: global, algorithm: fixed-window, limit: 1000, window: 1h, timeout: 300ms, onStoreError: open }'
    const tiered = (plans: string) =>
      `  - { name: api, match: { path: /api/** }, key: global, algorithm: fixed-window, window: 1h, tiers: { header: x-plan, default: free, plans: { ${plans} } } }`
    const changed = (limit: number) =>
      `  - { name: changed, match: { path: /c/** }, key: global, algorithm: fixed-window, limit: ${limit}, window: 1h }`
    // A clock that stands still: fragile's breaker reads open (2), not yet half-open, however slow the machine.
    const gw = await startInProcess(
      onRedis([fragile, tiered('free: { limit: 10 }, pro: { limit: 20 }'), changed(10)].join('\n')),
      { upstream: origin.url, clock: manualClock(1_750_000_000_000) },
    )
    const breakers = () => breakerLines(gw)
    const dashboard = () =>
      gw.gateway.metrics.dashboard
        .breakers()
        .map((b) => `${b.rule}/${b.tier}:${b.state}`)
        .sort()
    try {
      // A frozen Redis: fragile's calls time out and its breaker opens.
      redis.pause()
      try {
        await burst(12, 12, async (i) => (await fetch(`${gw.url}/f/${i}`)).status)
      } finally {
        redis.resume()
      }
      expect(await breakers()).toEqual([
        'edgelimit_breaker_state{rule="api",tier="free"} 0',
        'edgelimit_breaker_state{rule="api",tier="pro"} 0',
        'edgelimit_breaker_state{rule="changed",tier=""} 0',
        'edgelimit_breaker_state{rule="fragile",tier=""} 2',
      ])
      expect(dashboard()).toEqual(['api/free:closed', 'api/pro:closed', 'changed/:closed', 'fragile/:open'])
      // fragile and api's tier pro removed, api's tier free kept, changed on a new limiter.
      writeFileSync(gw.file, onRedis([tiered('free: { limit: 10 }'), changed(11)].join('\n')))
      const reloaded = await gw.gateway.reload('test')
      expect(reloaded.ok).toBe(true)
      expect(gw.logs.find((l) => l.msg === 'policy reloaded')).toMatchObject({
        limitersKept: 1,
        limitersNew: 1,
      })
      expect(await breakers()).toEqual([
        'edgelimit_breaker_state{rule="api",tier="free"} 0',
        'edgelimit_breaker_state{rule="changed",tier=""} 0',
      ])
      expect(dashboard()).toEqual(['api/free:closed', 'changed/:closed'])
      // A rule back again gets its gauge again, from its new limiter.
      writeFileSync(gw.file, onRedis([fragile, tiered('free: { limit: 10 }'), changed(11)].join('\n')))
      expect((await gw.gateway.reload('test')).ok).toBe(true)
      expect(await breakers()).toContain('edgelimit_breaker_state{rule="fragile",tier=""} 0')
      expect(dashboard()).toContain('fragile/:closed')
    } finally {
      await gw.close()
      await redis.stop()
    }
  })
})

describe('store breaker', () => {
  test("once the store is back, an open breaker's gauge and dashboard entry say half-open after openMs (1 s) without traffic; the next call closes it", async () => {
    const redis = await startRedis()
    // Decisions on a clock that stands still: the breaker opens at `start` and only the test moves time on.
    const start = 1_750_000_000_000
    const clock = manualClock(start)
    const gw = await startInProcess(
      `
store: ${redis.url}
identity: { secret: test }
rules:
  - { name: busy, match: { path: /b/** }, key: global, algorithm: fixed-window, limit: 1000, window: 1h, timeout: 300ms, onStoreError: open }
  - { name: rare, match: { path: /r/** }, key: global, algorithm: fixed-window, limit: 1000, window: 1h, timeout: 300ms, onStoreError: open }
`,
      { upstream: origin.url, clock },
    )
    const breakers = () => breakerLines(gw)
    const dashboard = () =>
      gw.gateway.metrics.dashboard
        .breakers()
        .map((b) => `${b.rule}:${b.state}@${b.since - start}`)
        .sort()
    try {
      // A stopped Redis: the calls of both rules time out and their breakers open.
      redis.pause()
      try {
        await burst(24, 24, async (i) => (await fetch(`${gw.url}/${i % 2 === 0 ? 'b' : 'r'}/${i}`)).status)
      } finally {
        redis.resume()
      }
      expect(await breakers()).toEqual([
        'edgelimit_breaker_state{rule="busy",tier=""} 2',
        'edgelimit_breaker_state{rule="rare",tier=""} 2',
      ])
      clock.advance(999)
      expect(await breakers()).toEqual([
        'edgelimit_breaker_state{rule="busy",tier=""} 2',
        'edgelimit_breaker_state{rule="rare",tier=""} 2',
      ])
      expect(dashboard()).toEqual(['busy:open@0', 'rare:open@0'])
      // openMs has passed: the next call of either rule would go to the store as a probe.
      clock.advance(1)
      expect(await breakers()).toEqual([
        'edgelimit_breaker_state{rule="busy",tier=""} 1',
        'edgelimit_breaker_state{rule="rare",tier=""} 1',
      ])
      expect(dashboard()).toEqual(['busy:half-open@1000', 'rare:half-open@1000'])
      // Redis is back: busy's probe succeeds and closes its breaker; rare, without traffic, stays at 1.
      expect((await fetch(`${gw.url}/b/probe`)).status).toBe(200)
      clock.advance(60_000)
      expect(await breakers()).toEqual([
        'edgelimit_breaker_state{rule="busy",tier=""} 0',
        'edgelimit_breaker_state{rule="rare",tier=""} 1',
      ])
      expect(dashboard()).toEqual(['busy:closed@1000', 'rare:half-open@1000'])
    } finally {
      await gw.close()
      await redis.stop()
    }
  })
})

describe('readiness while the store is unreachable', () => {
  test('/readyz is 503 while a fail-closed rule would refuse every request, 200 "degraded" naming the fail-closed rules otherwise; ready again once the store is back', async () => {
    const redis = await startRedis()
    const policy = (rules: string) => `
store: ${redis.url}
identity: { secret: test }
rules:
${rules}`
    // Every request goes through a fail-closed rule: refused with a 503 while the store is down.
    const everything = await startInProcess(
      policy(`  - { name: global, key: global, algorithm: fixed-window, limit: 1000, window: 1h, timeout: 300ms }
  - { name: open, match: { path: /o/** }, algorithm: fixed-window, limit: 1000, window: 1h, onStoreError: open, timeout: 300ms }`),
      { upstream: origin.url },
    )
    // Only /login is fail-closed: everything else is served without the store.
    const some = await startInProcess(
      policy(`  - { name: global, key: global, algorithm: fixed-window, limit: 1000, window: 1h, onStoreError: open, timeout: 300ms }
  - { name: login, match: { path: /login/** }, algorithm: fixed-window, limit: 1000, window: 1h, onStoreError: closed, timeout: 300ms }
  - { name: paths, match: { path: /** }, algorithm: fixed-window, limit: 1000, window: 1h, onStoreError: local, timeout: 300ms }
  - { name: shadowed, algorithm: fixed-window, limit: 1000, window: 1h, mode: shadow, timeout: 300ms }
  - { name: edge, algorithm: fixed-window, limit: 1000, window: 1h, consistency: local }`),
      { upstream: origin.url },
    )
    const gateways = [everything, some]
    const ready = async (gw: InProcess) => {
      const response = await fetch(`${gw.admin}/readyz`)
      return { status: response.status, body: (await response.json()) as Record<string, unknown> }
    }
    // Waits for what the store client reports (it reconnects every 100 ms), not for a time.
    const until = async (gw: InProcess, status: (s: string) => boolean) => {
      for (let i = 0; i < 500; i++) {
        const { body } = await ready(gw)
        if (status((body.store as { status: string }).status)) return
        await new Promise((r) => setTimeout(r, 20))
      }
      throw new Error(`the store status never changed: ${JSON.stringify((await ready(gw)).body)}`)
    }
    try {
      for (const gw of gateways) {
        expect(await ready(gw)).toEqual({
          status: 200,
          body: expect.objectContaining({
            ready: true,
            status: 'ready',
            store: { type: 'redis', status: 'ready', reachable: true },
          }),
        })
      }
      process.kill(redis.pid, 'SIGKILL')
      for (const gw of gateways) await until(gw, (s) => s !== 'ready')

      const down = await ready(everything)
      expect(down.status).toBe(503)
      expect(down.body).toMatchObject({
        ready: false,
        status: 'store-unreachable',
        draining: false,
        store: { type: 'redis', reachable: false },
        failClosed: ['global'],
        refusesEvery: ['global'],
      })
      // What readiness says is what the proxy does: every request refused, the fail-open path too.
      for (const path of ['/x', '/o/x']) expect((await fetch(`${everything.url}${path}`)).status).toBe(503)

      const degraded = await ready(some)
      expect(degraded.status).toBe(200)
      expect(degraded.body).toMatchObject({
        ready: true,
        status: 'degraded',
        store: { type: 'redis', reachable: false },
        failClosed: ['login'],
        refusesEvery: [],
      })
      expect((await fetch(`${some.url}/x`)).status).toBe(200)
      expect((await fetch(`${some.url}/login/x`)).status).toBe(503)

      await redis.restart()
      for (const gw of gateways) {
        await until(gw, (s) => s === 'ready')
        expect(await ready(gw)).toMatchObject({ status: 200, body: { ready: true, status: 'ready' } })
        expect((await ready(gw)).body).not.toHaveProperty('failClosed')
      }
    } finally {
      for (const gw of gateways) await gw.close()
      await redis.stop()
    }
  })

  test('a memory store is always reachable', async () => {
    const gw = await startInProcess('rules: [{ name: r, algorithm: fixed-window, limit: 1, window: 1h }]\n', {
      upstream: origin.url,
    })
    try {
      const response = await fetch(`${gw.admin}/readyz`)
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({
        ready: true,
        status: 'ready',
        store: { type: 'memory', status: 'ready', reachable: true },
      })
    } finally {
      await gw.close()
    }
  })
})

/** The `edgelimit_breaker_state` lines of a gateway's /metrics, sorted. */
async function breakerLines(gw: InProcess): Promise<string[]> {
  return (await (await fetch(`${gw.admin}/metrics`)).text())
    .split('\n')
    .filter((l) => l.startsWith('edgelimit_breaker_state{'))
    .sort()
}
