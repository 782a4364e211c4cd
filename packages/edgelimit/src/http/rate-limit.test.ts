import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { issuesOf } from '../../test/support/config-issues.js'
import { gcra } from '../algorithms.js'
import { systemClock } from '../clock.js'
import { ConfigError, EdgelimitError } from '../errors.js'
import { createLimiter, type Decision, type Limiter } from '../limiter.js'
import { manualClock } from '../testing/index.js'
import { quotaPolicy, rateLimitHeaders } from './headers.js'
import { type ClientKeyOptions, clientKey, hashKey, partitionKeyBytes } from './identity.js'
import { formatCidr, formatIp, type ParsedIp, parseCidr } from './ip.js'
import {
  after,
  createRateLimit,
  createRateLimitCore,
  type HttpRequest,
  type HttpVerdict,
  type RateLimitOptions,
} from './rate-limit.js'

const START = 1_700_000_000_000

/** `burst` requests per hour per key, under a frozen clock. */
function perHour(burst = 1, clock = manualClock(START)) {
  return createLimiter({
    rules: [{ name: 'hourly', algorithm: gcra({ limit: 1, period: '1h', burst }) }],
    clock,
  })
}

function request(peer: string | undefined, headers: Record<string, string> = {}, path = '/'): HttpRequest {
  return { method: 'GET', path, peer, header: (name) => headers[name] }
}

const apiKey = (r: HttpRequest) => r.header('x-api-key') ?? undefined

describe('key namespaces', () => {
  it('a key function returning the fallback key does not share the fallback bucket', async () => {
    const rl = createRateLimit({ limiter: perHour(), key: apiKey })
    const anonymous = await rl.check(request(undefined))
    const forged = await rl.check(request(undefined, { 'x-api-key': 'unknown-client' }))
    expect([anonymous.key, forged.key]).toEqual(['ip:unknown-client', 'k:unknown-client'])
    expect([anonymous.action, forged.action]).toEqual(['continue', 'continue'])
    expect((await rl.check(request(undefined))).action).toBe('respond')
    expect(rl.stats.fallbackKeys).toBe(2)
  })

  it("a key function returning another client's address hash does not share that client's bucket", async () => {
    const rl = createRateLimit({ limiter: perHour(), key: apiKey })
    const victim = await rl.check(request('203.0.113.7'))
    const hash = await hashKey('203.0.113.7')
    expect(victim.key).toBe(`ip:${hash}`)
    const attacker = await rl.check(request('198.51.100.1', { 'x-api-key': hash }))
    expect([attacker.key, attacker.action]).toEqual([`k:${hash}`, 'continue'])
    // Nor does the raw address, or the fallback name, as a key.
    for (const forged of ['203.0.113.7', 'ip:unknown-client', `ip:${hash}`]) {
      const v = await rl.check(request('198.51.100.1', { 'x-api-key': forged }))
      expect([v.key, v.action]).toEqual([`k:${forged}`, 'continue'])
    }
    expect((await rl.check(request('203.0.113.7'))).action).toBe('respond')
  })

  it('route shards cannot run into each other or into the default keys', async () => {
    const shared = perHour()
    const rl = createRateLimit({
      limiter: shared,
      key: apiKey,
      routes: [
        { path: '/x', name: 'a', limiter: shared },
        { path: '/y', name: 'a:k', limiter: shared },
        { path: '/z', name: 'k', limiter: shared },
      ],
    })
    const keys = []
    // Unescaped, each pair would meet: 'a' + 'k:k:z' vs 'a:k' + 'k:z'; 'k' + 'k:a' vs the default 'k:k:a'.
    for (const [path, key] of [
      ['/x', 'k:z'],
      ['/y', 'z'],
      ['/z', 'a'],
      ['/', 'k:a'],
    ] as const) {
      const v = await rl.check(request('192.0.2.1', { 'x-api-key': key }, path))
      expect(v.action).toBe('continue')
      keys.push(v.key)
    }
    expect(keys).toEqual(['r:a:k:k:z', 'r:a%3Ak:k:z', 'r:k:k:a', 'k:k:a'])
  })

  it("a key function's key over 128 characters is stored hashed: 16 KB keys cannot fill the store", async () => {
    const rl = createRateLimit({ limiter: perHour(), key: apiKey, identity: { secret: 's' } })
    const short = 'a'.repeat(128)
    expect((await rl.check(request('192.0.2.1', { 'x-api-key': short }))).key).toBe(`k:${short}`)
    const long = 'b'.repeat(16 * 1024)
    const first = await rl.check(request('192.0.2.1', { 'x-api-key': long }))
    expect(first.key).toBe(`kh:${await hashKey(long, 's')}`)
    expect([first.action, (first.key as string).length]).toEqual(['continue', 46])
    // The same long key is the same bucket; another one is another bucket.
    expect((await rl.check(request('192.0.2.9', { 'x-api-key': long }))).action).toBe('respond')
    expect((await rl.check(request('192.0.2.1', { 'x-api-key': `${long}x` }))).action).toBe('continue')
    // A short key shaped like a hashed one stays in its own namespace.
    expect((await rl.check(request('192.0.2.1', { 'x-api-key': first.key as string }))).key).toBe(
      `k:${first.key}`,
    )
  })

  it('a route holds for every spelling of its path that some server reads as that path', async () => {
    const login = perHour(2)
    const rl = createRateLimit({
      routes: [
        { path: '/login', name: 'login', limiter: login },
        { path: /^\/Admin$/, name: 'admin', limiter: perHour(1) },
      ],
    })
    const spellings = [
      '//login',
      '/LOGIN',
      '/login/',
      '/%6Cogin',
      '/x/../login',
      '/x\\..\\login',
      '/%ff/%2e%2e/login',
    ]
    const actions = []
    for (const path of spellings) actions.push((await rl.check(request('192.0.2.1', {}, path))).action)
    // Two pass, then each spelling is the same route, limited.
    expect(actions).toEqual(['continue', 'continue', ...spellings.slice(2).map(() => 'respond')])
    // Paths that are not /login pass untouched; a bad escape is matched as it came.
    for (const path of ['/logins', '/login/x', '/log%2Fin', '/log%zzin'])
      expect([path, (await rl.check(request('192.0.2.1', {}, path))).key]).toEqual([path, undefined])
    // A RegExp sees the path as it came: /Admin matches, /admin and /x/../Admin do not.
    expect((await rl.check(request('192.0.2.2', {}, '/Admin'))).key).toMatch(/^r:admin:/)
    expect((await rl.check(request('192.0.2.3', {}, '/admin'))).key).toBeUndefined()
    expect((await rl.check(request('192.0.2.3', {}, '/x/../Admin'))).key).toBeUndefined()
  })

  it('a route ending in `/*` also limits its path with that segment empty (`/api/`), as Fastify and Hono route it', async () => {
    const rl = createRateLimit({ routes: [{ path: '/api/*', name: 'api', limiter: perHour(1) }] })
    expect((await rl.check(request('192.0.2.1', {}, '/api/x'))).action).toBe('continue')
    for (const path of ['/api/', '/api//', '/API/', '/api'])
      expect([path, (await rl.check(request('192.0.2.1', {}, path))).action]).toEqual([path, 'respond'])
    expect((await rl.check(request('192.0.2.1', {}, '/api/x/y'))).key).toBeUndefined()
  })

  it('a route for GET also limits HEAD, which frameworks route to the GET handler', async () => {
    const rl = createRateLimit({
      routes: [
        { path: '/login', methods: ['GET'], name: 'login', limiter: perHour(2) },
        { path: '/head', methods: ['HEAD'], name: 'head', limiter: perHour(1) },
        { path: '/post', methods: ['POST'], name: 'post', limiter: perHour(1) },
      ],
    })
    const check = (method: string, path: string) => rl.check({ ...request('192.0.2.1', {}, path), method })
    // GET and HEAD share the route's budget.
    expect((await check('HEAD', '/login')).key).toMatch(/^r:login:/)
    expect((await check('GET', '/login')).action).toBe('continue')
    expect((await check('HEAD', '/login')).action).toBe('respond')
    expect((await check('GET', '/login')).action).toBe('respond')
    expect((await check('HEAD', '/head')).key).toMatch(/^r:head:/)
    expect((await check('GET', '/head')).key).toBeUndefined()
    expect((await check('HEAD', '/post')).key).toBeUndefined()
  })

  it('a key function returning null, undefined or an empty string falls back to the address; other non-strings reject', async () => {
    const rl = createRateLimit({
      limiter: perHour(2),
      key: (r) => (r.path === '/n' ? (null as never) : undefined),
    })
    expect((await rl.check(request('192.0.2.1', {}, '/n'))).key).toBe(`ip:${await hashKey('192.0.2.1')}`)
    expect((await rl.check(request('192.0.2.1'))).key).toBe(`ip:${await hashKey('192.0.2.1')}`)
    // An empty key (an empty X-Api-Key header) is no key: not one bucket `k:` shared by all of them.
    const empty = createRateLimit({ limiter: perHour(), key: () => '' })
    expect((await empty.check(request('192.0.2.1'))).key).toBe(`ip:${await hashKey('192.0.2.1')}`)
    expect((await empty.check(request('192.0.2.2'))).action).toBe('continue')
    const bad = createRateLimit({ limiter: perHour(), key: () => 42 as never })
    await expect(bad.check(request('192.0.2.1'))).rejects.toMatchObject({
      code: 'ERR_EDGELIMIT_KEY',
      message: expect.stringContaining('returned 42 (number)'),
    })
  })
})

describe('hostile requests', () => {
  it('any path, method, header or peer gets a verdict with printable fields, never an error (property)', async () => {
    const rl = createRateLimit({
      limiter: perHour(1_000),
      key: (r) => r.header('x-api-key') ?? undefined,
      cost: (r) => (r.method === 'POST' ? 2 : 1),
      identity: { trustedProxies: ['10.0.0.0/8'], secret: 's' },
      routes: [
        { path: '/login', limiter: perHour(2) },
        { path: '/api/**', methods: ['GET'], limiter: perHour(5) },
        { path: /^\/Raw\//, limiter: perHour(5) },
      ],
    })
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.constantFrom('', '%', '%zz', '%C3', '\\', '..'),
    )
    const request = fc.record({
      method: fc.constantFrom('GET', 'POST', 'get', '', 'M-SEARCH'),
      path: fc.oneof(
        text,
        text.map((t) => `/${t}`),
        fc.constantFrom('/login', '//LOGIN/', '/api/%2e%2e/login'),
      ),
      peer: fc.oneof(
        fc.constant(undefined),
        fc.constantFrom('10.1.2.3', '::ffff:10.0.0.1', '2001:db8::1', 'junk'),
        text,
      ),
      headers: fc.dictionary(fc.constantFrom('x-api-key', 'x-forwarded-for', 'forwarded'), text),
    })
    await fc.assert(
      fc.asyncProperty(request, async ({ headers, ...r }) => {
        const verdict = await rl.check({ ...r, header: (name) => headers[name] })
        expect(['continue', 'respond']).toContain(verdict.action)
        for (const [name, value] of verdict.headers)
          expect(`${name}: ${value}`).toMatch(/^[\x21-\x7e]+: [\x20-\x7e]*$/)
      }),
      { numRuns: 2000 },
    )
  })
})

describe('allowList', () => {
  const limited = async (options: Partial<RateLimitOptions>, req: HttpRequest) => {
    const v = await createRateLimit({ limiter: perHour(), ...options }).check(req)
    return v.decision !== undefined
  }

  it.each([
    ['2001:db8::1', '2001:DB8::1', false],
    ['2001:db8:0:0:0:0:0:1', '2001:DB8::1', false],
    ['192.0.2.9', '::ffff:192.0.2.9', false],
    ['::ffff:192.0.2.9', '192.0.2.9', false],
    ['10.200.3.4', '10.0.0.0/8', false],
    ['::ffff:10.200.3.4', '10.0.0.0/8', false],
    ['10.200.3.4', '::ffff:10.0.0.0/104', false],
    ['2001:db8:ff:1::5', '2001:db8:ff::/48', false],
    ['11.0.0.1', '10.0.0.0/8', true],
    ['2001:db8::2', '2001:DB8::1', true],
    ['2001:db9::1', '2001:db8::/32', true],
  ])('peer %s against %s: limited %s', async (peer, entry, expected) => {
    expect(await limited({ allowList: [entry] }, request(peer))).toBe(expected)
  })

  it('skips the limiter entirely: no headers, no decision, nothing charged', async () => {
    const rl = createRateLimit({ limiter: perHour(), allowList: ['192.0.2.9'] })
    for (let i = 0; i < 3; i++)
      expect(await rl.check(request('192.0.2.9'))).toEqual({
        action: 'continue',
        headers: [],
        delayMs: 0,
      })
  })

  it('an allowed address passes even when a key function picks the key', async () => {
    expect(await limited({ key: () => 'tenant', allowList: ['10.0.0.0/8'] }, request('10.1.1.1'))).toBe(false)
    expect(await limited({ key: () => 'tenant', allowList: ['10.0.0.0/8'] }, request('11.1.1.1'))).toBe(true)
  })

  it('addresses match the resolved client: a trusted proxy forwards it, a forged header does not count', async () => {
    const identity = { trustedProxies: ['10.0.0.0/8'] }
    const xff = { 'x-forwarded-for': '203.0.113.9' }
    expect(await limited({ identity, allowList: ['203.0.113.9'] }, request('10.0.0.1', xff))).toBe(false)
    expect(await limited({ allowList: ['203.0.113.9'] }, request('198.51.100.1', xff))).toBe(true)
  })

  it("other entries match a key function's key only, never an address, the fallback or a hash", async () => {
    const allowList = ['vip', '203.0.113.9', 'unknown-client', 'user:42', 'cafe']
    expect(await limited({ key: apiKey, allowList }, request('192.0.2.1', { 'x-api-key': 'vip' }))).toBe(
      false,
    )
    expect(await limited({ key: apiKey, allowList }, request('192.0.2.1', { 'x-api-key': 'user:42' }))).toBe(
      false,
    )
    // An address entry is matched against the address, not against what a client claims as its key.
    expect(
      await limited({ key: apiKey, allowList }, request('192.0.2.1', { 'x-api-key': '203.0.113.9' })),
    ).toBe(true)
    expect(await limited({ allowList }, request(undefined))).toBe(true)
    const hash = await hashKey('192.0.2.1')
    expect(await limited({ allowList: [hash] }, request('192.0.2.1'))).toBe(true)
  })

  it('every textual form of an address or network is read as one, never as a key (property)', async () => {
    const v4 = fc.uint8Array({ minLength: 4, maxLength: 4 }).map((bytes): ParsedIp => ({ version: 4, bytes }))
    const v6 = fc
      .uint8Array({ minLength: 16, maxLength: 16 })
      .map((bytes): ParsedIp => ({ version: 6, bytes }))
    const full = (ip: ParsedIp) =>
      ip.version === 4
        ? `::ffff:${formatIp(ip)}`
        : Array.from({ length: 8 }, (_, i) =>
            (((ip.bytes[2 * i] ?? 0) << 8) | (ip.bytes[2 * i + 1] ?? 0)).toString(16),
          )
            .join(':')
            .toUpperCase()
    await fc.assert(
      fc.asyncProperty(fc.oneof(v4, v6), fc.nat(128), async (ip, bits) => {
        const peer = formatIp(ip)
        const prefix = Math.min(bits, ip.bytes.length * 8)
        const network = formatCidr(
          parseCidr(`${peer}/${prefix}`) as NonNullable<ReturnType<typeof parseCidr>>,
        )
        for (const entry of [peer, full(ip), network])
          expect(await limited({ allowList: [entry] }, request(peer))).toBe(false)
      }),
      { numRuns: 200 },
    )
  })

  it('invalid entries are one ConfigError at creation', () => {
    const limiter = perHour()
    const allowList = [
      '10.0.0.0/33',
      '300.1.1.1',
      '010.0.0.1',
      '2001:db8::/129',
      '1.2.3.4:80',
      '[::1]',
      '',
      42,
      'fine-key',
      '10.0.0.0/8',
      // Made of address characters only, with a '.' or ':': an address, however mistyped.
      '10.0.0.*',
      '10.0.0',
      '192.168.1.1-192.168.1.9',
      '10.0.0.0/8,',
      'fe80::1%eth0',
      '127.1',
      'dead:beef',
      // Keys: a plain hex word, or letters beyond hex digits.
      'deadbeef',
      'admin',
      'user:42',
    ] as unknown as string[]
    expect(issuesOf(() => createRateLimit({ limiter, allowList }))).toEqual({
      'allowList[0]': ['ERR_CIDR'],
      'allowList[1]': ['ERR_CIDR'],
      'allowList[2]': ['ERR_CIDR'],
      'allowList[3]': ['ERR_CIDR'],
      'allowList[4]': ['ERR_CIDR'],
      'allowList[5]': ['ERR_CIDR'],
      'allowList[6]': ['ERR_STRING'],
      'allowList[7]': ['ERR_STRING'],
      'allowList[10]': ['ERR_CIDR'],
      'allowList[11]': ['ERR_CIDR'],
      'allowList[12]': ['ERR_CIDR'],
      'allowList[13]': ['ERR_CIDR'],
      'allowList[14]': ['ERR_CIDR'],
      'allowList[15]': ['ERR_CIDR'],
      'allowList[16]': ['ERR_CIDR'],
    })
    expect(issuesOf(() => createRateLimit({ limiter, allowList: '10.0.0.0/8' as never }))).toEqual({
      allowList: ['ERR_ARRAY'],
    })
  })
})

describe('clock', () => {
  it('X-RateLimit-Reset comes from the clock option', async () => {
    const clock = manualClock(START)
    const rl = createRateLimit({ limiter: perHour(1, clock), headers: 'legacy', clock })
    const reset = (v: { headers: readonly (readonly [string, string])[] }) =>
      Object.fromEntries(v.headers)['x-ratelimit-reset']
    expect(reset(await rl.check(request('192.0.2.1')))).toBe(String(START / 1000 + 3600))
    clock.advance(1000)
    expect(reset(await rl.check(request('192.0.2.1')))).toBe(String(START / 1000 + 1 + 3599))
  })

  it('a clock that reads anything but a non-negative integer fails the request with ERR_EDGELIMIT_CLOCK', async () => {
    // Before, `new Date()` or NaN became `X-RateLimit-Reset: NaN` on an admitted response.
    for (const bad of [new Date(START), Number.NaN, -1, 1.5, '1700000000000', undefined]) {
      const clock = { now: () => bad as unknown as number }
      const rl = createRateLimit({ limiter: perHour(5), headers: 'legacy', clock })
      const failure = await rl.check(request('192.0.2.1')).then(
        (v) => v,
        (e: unknown) => e,
      )
      expect(failure).toBeInstanceOf(EdgelimitError)
      expect((failure as EdgelimitError).code).toBe('ERR_EDGELIMIT_CLOCK')
      expect((failure as Error).message).toMatch(/`clock\.now\(\)`.*non-negative integer/)
    }
    // The draft standards never read the HTTP clock: a bad one is not consulted there.
    const rl = createRateLimit({ limiter: perHour(5), clock: { now: () => Number.NaN } })
    expect((await rl.check(request('192.0.2.1'))).action).toBe('continue')
  })

  it('defaults to the system clock', async () => {
    const rl = createRateLimit({ limiter: perHour(1, manualClock(0)), headers: 'legacy' })
    const before = Math.ceil(Date.now() / 1000)
    const v = await rl.check(request('192.0.2.1'))
    const after = Math.ceil(Date.now() / 1000)
    const reset = Number(Object.fromEntries(v.headers)['x-ratelimit-reset'])
    expect(reset).toBeGreaterThanOrEqual(before + 3600)
    expect(reset).toBeLessThanOrEqual(after + 3600)
  })
})

describe('validation at creation', () => {
  it('checks `clock` as createLimiter does: absent, or an object with a now() method', () => {
    const limiter = perHour()
    const now = () => 0
    for (const clock of [{ now: 5 }, null, 7, Object.assign(() => 0, { now })]) {
      const message = (make: () => unknown) => {
        try {
          make()
        } catch (error) {
          return (error as ConfigError).issues.find((i) => i.path === 'clock')
        }
      }
      const http = message(() => createRateLimit({ limiter, clock } as unknown as RateLimitOptions))
      const rules = [{ name: 'h', algorithm: gcra({ limit: 1, period: '1h' }) }]
      const core = message(() => createLimiter({ rules, clock } as never))
      expect(http?.code).toBe('ERR_CLOCK')
      expect(http).toEqual(core)
    }
    expect(() => createRateLimit({ limiter, clock: { now } })).not.toThrow()
  })

  it('lists every problem with its path and code in one ConfigError', () => {
    const limiter = perHour()
    const options = {
      limiter,
      cost: 1.5,
      key: 'x-api-key',
      skip: true,
      onLimited: {},
      headers: 'draft-11',
      partitionKey: 'yes',
      clock: { now: 5 },
      identity: { trustedProxies: ['10.0.0.0/33'] },
      routes: [
        { path: 'api/*', limiter },
        { path: /api/g, limiter, cost: -1 },
        { path: '/x', methods: ['get', 'POST', 7], limiter: {}, name: '', cost: 'heavy', key: 'user' },
        'nope',
        { limiter },
      ],
    } as unknown as RateLimitOptions
    expect(issuesOf(() => createRateLimit(options))).toEqual({
      cost: ['ERR_INTEGER'],
      key: ['ERR_FUNCTION'],
      skip: ['ERR_FUNCTION'],
      onLimited: ['ERR_FUNCTION'],
      headers: ['ERR_HEADER_STANDARD'],
      partitionKey: ['ERR_BOOLEAN'],
      clock: ['ERR_CLOCK'],
      'identity.trustedProxies[0]': ['ERR_CIDR'],
      'routes[0].path': ['ERR_ROUTE_PATH'],
      'routes[1].path': ['ERR_ROUTE_PATH'],
      'routes[1].cost': ['ERR_INTEGER'],
      'routes[2].methods[0]': ['ERR_METHOD'],
      'routes[2].methods[2]': ['ERR_METHOD'],
      'routes[2].limiter': ['ERR_LIMITER'],
      'routes[2].name': ['ERR_STRING'],
      'routes[2].cost': ['ERR_COST'],
      'routes[2].key': ['ERR_FUNCTION'],
      'routes[3]': ['ERR_OBJECT'],
      'routes[4].path': ['ERR_ROUTE_PATH'],
    })
  })

  it('names a `headers` list of values that are not standards as such, never as a clash of standards', () => {
    const limiter = perHour()
    // A value with no string form (a null-prototype object) used to throw a bare TypeError from
    // the clash message; others made "[object Object], draft-7 emit clashing RateLimit fields".
    for (const headers of [
      [[], Object.create(null)],
      [{}, 'draft-7'],
      ['draft-11', 'draft-7'],
      [1n, Symbol('s')],
    ]) {
      let error: unknown
      try {
        createRateLimit({ limiter, headers } as unknown as RateLimitOptions)
      } catch (e) {
        error = e
      }
      expect(error, String(headers.length)).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).issues.map((i) => i.code)).not.toContain('ERR_HEADER_CONFLICT')
      expect((error as ConfigError).message).not.toContain('[object')
    }
    // Two real drafts still clash.
    expect(
      issuesOf(() => createRateLimit({ limiter, headers: ['draft-7', 'draft-6', {}] } as never)),
    ).toEqual({
      headers: ['ERR_HEADER_STANDARD', 'ERR_HEADER_CONFLICT'],
    })
  })

  it('never ignores an unknown option name: at the top, in identity and in routes, all in one ConfigError', () => {
    const limiter = perHour()
    const options = {
      limiter,
      allowlist: ['10.0.0.0/8'],
      trustedProxies: ['10.0.0.0/8'],
      identity: { trustedProxy: ['10.0.0.0/8'], secert: 's3cret', ipv6Prefix: 48 },
      routes: [{ path: '/login', method: ['POST'], limiter }],
    } as unknown as RateLimitOptions
    expect(issuesOf(() => createRateLimit(options))).toEqual({
      allowlist: ['ERR_UNKNOWN_OPTION'],
      trustedProxies: ['ERR_UNKNOWN_OPTION'],
      'identity.trustedProxy': ['ERR_UNKNOWN_OPTION'],
      'identity.secert': ['ERR_UNKNOWN_OPTION'],
      'routes[0].method': ['ERR_UNKNOWN_OPTION'],
    })
    expect(() => createRateLimit({ limiter, identity: { trustedProxy: [] } } as never)).toThrow(
      /identity\.trustedProxy: expected one of trustedProxies, .* \[ERR_UNKNOWN_OPTION\]/,
    )
    // `rules` for `routes`: the misspelt name, not "no limiter".
    expect(issuesOf(() => createRateLimit({ rules: [{ path: '/', limiter }] } as never))).toEqual({
      rules: ['ERR_UNKNOWN_OPTION'],
    })
    // `peer` is the fetch and Hono adapters' own option, not the HTTP layer's.
    expect(issuesOf(() => createRateLimit({ limiter, peer: () => '192.0.2.1' } as never))).toEqual({
      peer: ['ERR_UNKNOWN_OPTION'],
    })
    // Every name it documents is accepted.
    expect(() =>
      createRateLimit({
        limiter,
        routes: [{ path: '/a', methods: ['GET'], limiter, name: 'a', cost: 2, key: () => undefined }],
        key: () => undefined,
        identity: {
          trustedProxies: ['10.0.0.0/8'],
          header: 'x-forwarded-for',
          trustPlatform: false,
          ipv6Prefix: 56,
          ipv4Prefix: 24,
          secret: 's3cret',
          fallback: 'nobody',
        },
        cost: 1,
        skip: () => false,
        allowList: ['192.0.2.1'],
        headers: 'draft-7',
        partitionKey: true,
        clock: systemClock,
        onLimited: () => undefined,
      }),
    ).not.toThrow()
  })

  it('options that are not an object are a ConfigError, not a TypeError', () => {
    for (const options of [undefined, null, 'limiter', []])
      expect(issuesOf(() => createRateLimit(options as never))).toEqual({ options: ['ERR_OBJECT'] })
  })

  it('partitionKey needs identity.secret: pk unkeyed would let anyone confirm a guessed key offline', async () => {
    const limiter = perHour()
    expect(issuesOf(() => createRateLimit({ limiter, partitionKey: true }))).toEqual({
      partitionKey: ['ERR_PARTITION_KEY'],
    })
    expect(() => createRateLimit({ limiter, partitionKey: true, identity: {} })).toThrow(
      /partitionKey: .*identity\.secret/,
    )
    const keyed = createRateLimit({ limiter, partitionKey: true, identity: { secret: 's3cret' } })
    const v = await keyed.check(request('192.0.2.1'))
    expect(Object.fromEntries(v.headers).ratelimit).toMatch(/;pk=:[A-Za-z0-9+/]{22}==:$/)
    expect(() => createRateLimit({ limiter, partitionKey: false })).not.toThrow()
  })

  it('names the path and what was expected in the message', () => {
    expect(() => createRateLimit({ limiter: perHour(), cost: -2 })).toThrow(
      /cost: expected a non-negative integer .* got -2 \(number\) \[ERR_INTEGER\]/,
    )
    expect(() => createRateLimit({ limiter: {} as never })).toThrow(/limiter: expected a limiter/)
  })

  it('accepts well-formed options, and still needs a limiter or a route', () => {
    const limiter = perHour()
    expect(() =>
      createRateLimit({
        limiter,
        cost: 0,
        key: apiKey,
        skip: () => false,
        onLimited: () => undefined,
        headers: ['draft-7', 'legacy'],
        partitionKey: true,
        identity: { secret: 's3cret' },
        clock: manualClock(0),
        routes: [
          { path: '/api/*', methods: ['GET', 'M-SEARCH'], limiter, name: 'api', cost: (r) => r.path.length },
          { path: /^\/files\//i, limiter },
          { path: '**', limiter, cost: 3 },
        ],
      }),
    ).not.toThrow()
    // A route for no method would never match: refused, as the gateway's policy refuses it.
    expect(issuesOf(() => createRateLimit({ routes: [{ path: '/a', methods: [], limiter }] }))).toEqual({
      'routes[0].methods': ['ERR_ARRAY'],
    })
    expect(() => createRateLimit({ routes: [{ path: '/a', methods: [], limiter }] })).toThrow(
      'routes[0].methods: expected an array of one or more methods, got an empty array [ERR_ARRAY]',
    )
    // Nothing to check requests against: a ConfigError with a code, as for every other option.
    expect(issuesOf(() => createRateLimit({}))).toEqual({ limiter: ['ERR_LIMITER'] })
    expect(issuesOf(() => createRateLimit({ routes: [] }))).toEqual({ limiter: ['ERR_LIMITER'] })
    expect(() => createRateLimit({})).toThrow(
      'limiter: expected a limiter from createLimiter(), got undefined [ERR_LIMITER]',
    )
    // With routes, each brings its own limiter and `limiter` is optional.
    expect(() => createRateLimit({ routes: [{ path: '/api/*', limiter: perHour() }] })).not.toThrow()
  })
})

describe('headers', () => {
  it('a standard listed twice is rendered once: each field once, on the 200 and on the 429', async () => {
    const once = createRateLimit({
      limiter: perHour(),
      headers: ['draft-7', 'legacy'],
      clock: manualClock(START),
    })
    const twice = createRateLimit({
      limiter: perHour(),
      headers: ['draft-7', 'legacy', 'draft-7', 'legacy'],
      clock: manualClock(START),
    })
    for (let i = 0; i < 2; i++) {
      const [expected, got] = [
        await once.check(request('203.0.113.7')),
        await twice.check(request('203.0.113.7')),
      ]
      expect(got.headers).toEqual(expected.headers)
      expect(got.response?.headers).toEqual(expected.response?.headers)
    }
    // The second was the 429, whose fields a Response joins: `x-ratelimit-limit: 1, 1` was no integer.
    const answer = (await twice.check(request('203.0.113.7'))).response
    expect(new Headers(answer?.headers as [string, string][]).get('x-ratelimit-limit')).toBe('1')
  })
})

describe('cost functions at request time', () => {
  it.each([1.5, -1, Number.NaN, '2', undefined, 2 ** 53])(
    'a cost function returning %s rejects with ERR_EDGELIMIT_COST and charges nothing',
    async (value) => {
      const rl = createRateLimit({
        limiter: perHour(),
        cost: (r) => (r.path === '/bad' ? (value as number) : 1),
      })
      const failure = rl.check(request('192.0.2.1', {}, '/bad'))
      await expect(failure).rejects.toBeInstanceOf(EdgelimitError)
      await expect(failure).rejects.toMatchObject({
        code: 'ERR_EDGELIMIT_COST',
        message: expect.stringMatching(
          /^The cost function returned .* for GET \/bad; expected a non-negative/,
        ),
      })
      expect((await rl.check(request('192.0.2.1'))).action).toBe('continue')
    },
  )

  it("names the route whose cost function failed, and passes the function's own error through", async () => {
    const limiter = perHour()
    const rl = createRateLimit({
      limiter,
      routes: [
        { path: '/ok', limiter },
        { path: '/bulk', limiter, cost: async () => -3 },
        {
          path: '/throws',
          limiter,
          cost: () => {
            throw new Error('no cost')
          },
        },
      ],
    })
    await expect(rl.check(request('192.0.2.1', {}, '/bulk'))).rejects.toThrow(
      'The routes[1].cost function returned -3 (number) for GET /bulk',
    )
    await expect(rl.check(request('192.0.2.1', {}, '/throws'))).rejects.toThrow('no cost')
  })

  it('a cost of 0 decides without charging', async () => {
    const rl = createRateLimit({ limiter: perHour(), cost: (r) => (r.path === '/peek' ? 0 : 1) })
    for (let i = 0; i < 3; i++)
      expect((await rl.check(request('192.0.2.1', {}, '/peek'))).action).toBe('continue')
    expect((await rl.check(request('192.0.2.1'))).action).toBe('continue')
    expect((await rl.check(request('192.0.2.1'))).action).toBe('respond')
  })
})

describe('client identity end to end', () => {
  /** Checks each request in turn; returns [key, action] per request. */
  async function run(options: Partial<RateLimitOptions>, requests: HttpRequest[], burst = 1) {
    const rl = createRateLimit({ limiter: perHour(burst), ...options })
    const out: [string | undefined, string][] = []
    for (const r of requests) {
      const v = await rl.check(r)
      out.push([v.key, v.action])
    }
    return { out, stats: rl.stats }
  }

  it('a forged X-Forwarded-For or CF-Connecting-IP from an untrusted peer is keyed by the peer', async () => {
    const peerKey = `ip:${await hashKey('198.51.100.1')}`
    for (const identity of [undefined, { header: 'cf-connecting-ip' }, { trustedProxies: ['10.0.0.0/8'] }]) {
      const { out } = await run({ ...(identity ? { identity } : {}) }, [
        request('198.51.100.1', { 'x-forwarded-for': '203.0.113.1', 'cf-connecting-ip': '203.0.113.1' }),
        request('198.51.100.1', { 'x-forwarded-for': '203.0.113.2', 'cf-connecting-ip': '203.0.113.2' }),
        request('198.51.100.1'),
      ])
      expect(out).toEqual([
        [peerKey, 'continue'],
        [peerKey, 'respond'],
        [peerKey, 'respond'],
      ])
    }
  })

  it('the same headers from a trusted proxy do name the client', async () => {
    const { out } = await run({ identity: { header: 'cf-connecting-ip', trustedProxies: ['10.0.0.0/8'] } }, [
      request('10.0.0.1', { 'cf-connecting-ip': '203.0.113.1' }),
      request('10.0.0.1', { 'cf-connecting-ip': '203.0.113.2' }),
    ])
    expect(out).toEqual([
      [`ip:${await hashKey('203.0.113.1')}`, 'continue'],
      [`ip:${await hashKey('203.0.113.2')}`, 'continue'],
    ])
  })

  it('IPv6 clients rotating inside one /64 share one bucket; another /64 has its own', async () => {
    const same64 = `ip:${await hashKey('2001:db8:1:2::/64')}`
    const { out } = await run(
      {},
      [
        request('2001:db8:1:2::1'),
        request('2001:db8:1:2:ffff:1234:5678:9abc'),
        request('2001:DB8:1:2:aaaa:0:0:7'),
        request('2001:db8:1:2::2'),
        request('2001:db8:1:3::1'),
      ],
      3,
    )
    expect(out).toEqual([
      [same64, 'continue'],
      [same64, 'continue'],
      [same64, 'continue'],
      [same64, 'respond'],
      [`ip:${await hashKey('2001:db8:1:3::/64')}`, 'continue'],
    ])
  })

  it('IPv4-mapped IPv6 and plain IPv4 share one bucket', async () => {
    const key = `ip:${await hashKey('203.0.113.7')}`
    const { out } = await run(
      {},
      [request('::ffff:203.0.113.7'), request('203.0.113.7'), request('::FFFF:cb00:7107')],
      2,
    )
    expect(out).toEqual([
      [key, 'continue'],
      [key, 'continue'],
      [key, 'respond'],
    ])
  })

  it('keys every request exactly as clientKey does, also from its address cache (property)', async () => {
    const identities: ClientKeyOptions[] = [
      {},
      { trustedProxies: ['10.0.0.0/8', '::1/128'] },
      { trustedProxies: 1, fallback: 'nobody' },
      { header: 'cf-connecting-ip', trustPlatform: true },
      { ipv6Prefix: 48, ipv4Prefix: 24, secret: 'pepper', trustedProxies: [] },
    ]
    // One instance per identity for the whole run, so later runs hit the cache filled by earlier ones.
    const instances = identities.map((identity) => createRateLimit({ limiter: perHour(1e6), identity }))
    const address = fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.ipV4().map((ip) => `::ffff:${ip}`),
      fc.constantFrom('10.0.0.1', '10.9.9.9', '::1', '2001:db8::1', '2001:db8::2', '192.0.2.1'),
      fc.constantFrom('', 'unknown', 'garbage', '300.1.1.1', ' 192.0.2.1 '),
    )
    await fc.assert(
      fc.asyncProperty(
        fc.nat(identities.length - 1),
        fc.option(address, { nil: undefined }),
        fc.option(fc.array(address, { maxLength: 3 }), { nil: undefined }),
        async (which, peer, chain) => {
          const headers: Record<string, string> =
            chain === undefined
              ? {}
              : { 'x-forwarded-for': chain.join(', '), 'cf-connecting-ip': chain[0] ?? '' }
          const req = request(peer, headers)
          const expected = await clientKey(req, identities[which])
          const rl = instances[which] as ReturnType<typeof createRateLimit>
          for (let i = 0; i < 2; i++) {
            const before = rl.stats.fallbackKeys
            expect((await rl.check(req)).key).toBe(`ip:${expected.key}`)
            expect(rl.stats.fallbackKeys - before).toBe(expected.fallback ? 1 : 0)
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('stays exact past the bound of its address cache', async () => {
    const rl = createRateLimit({ limiter: perHour(2) })
    const first = await rl.check(request('2001:db8:1::1'))
    for (let i = 0; i < 10_050; i++) await rl.check(request(`2001:db8:2:${i.toString(16)}::1`))
    const again = await rl.check(request('2001:db8:1::1'))
    expect([again.key, again.action]).toEqual([first.key, 'continue'])
    expect((await rl.check(request('2001:db8:1::2'))).action).toBe('respond')
  })

  it('missing and malformed addresses share the documented fallback and are counted', async () => {
    const bad = [undefined, '', '  ', 'not-an-ip', '999.1.1.1', '1.2.3.4.5', '010.0.0.1', 'fe80::1%bad zone']
    const { out, stats } = await run(
      {},
      bad.map((peer) => request(peer)),
      100,
    )
    expect(new Set(out.map(([key]) => key))).toEqual(new Set(['ip:unknown-client']))
    expect(stats.fallbackKeys).toBe(bad.length)

    // A trusted proxy that sends a garbled header: the same fallback. One that sends none made
    // the request itself (a health check): keyed by its own address, not counted as a fallback.
    const proxied = await run({ identity: { trustedProxies: ['10.0.0.0/8'], fallback: 'anon' } }, [
      request('10.0.0.1', { 'x-forwarded-for': 'unknown' }),
      request('10.0.0.1', { 'x-forwarded-for': '203.0.113.1' }),
      request('10.0.0.1'),
      request('10.0.0.1', { 'x-forwarded-for': ' ' }),
    ])
    const proxy = `ip:${await hashKey('10.0.0.1')}`
    expect(proxied.out.map(([key]) => key)).toEqual([
      'ip:anon',
      `ip:${await hashKey('203.0.113.1')}`,
      proxy,
      proxy,
    ])
    expect(proxied.stats.fallbackKeys).toBe(1)

    // A key function's key is never a fallback, whatever it says.
    const keyed = await run({ key: apiKey }, [request(undefined, { 'x-api-key': 'unknown-client' })])
    expect([keyed.out[0]?.[0], keyed.stats.fallbackKeys]).toEqual(['k:unknown-client', 0])
  })
})

describe('the synchronous path (createRateLimitCore().run)', () => {
  it('answers without a promise once the client is known, with the memory store', async () => {
    const core = createRateLimitCore({ limiter: perHour(5) })
    const first = core.run(request('192.0.2.1'))
    expect(first).toBeInstanceOf(Promise) // the address is hashed once, through Web Crypto
    expect(await first).toMatchObject({ action: 'continue', key: `ip:${await hashKey('192.0.2.1')}` })
    const second = core.run(request('192.0.2.1'))
    expect(second).not.toBeInstanceOf(Promise)
    expect(second).toMatchObject({
      action: 'continue',
      key: `ip:${await hashKey('192.0.2.1')}`,
      headers: [
        ['ratelimit-policy', '"hourly";q=5;w=18000'],
        ['ratelimit', '"hourly";r=3;t=7200'],
      ],
    })
  })

  it('decides through limit() for a limiter whose store is not in-process, and for one without limitSync', async () => {
    const real = perHour(3)
    const calls = { limit: 0, limitSync: 0 }
    const remoteLike: Limiter = {
      ...real,
      limit: (key, options) => {
        calls.limit++
        return real.limit(key, options)
      },
      limitSync: () => {
        calls.limitSync++
        throw new EdgelimitError('ERR_EDGELIMIT_SYNC_UNSUPPORTED', 'not synchronous')
      },
    }
    const { limitSync: _, ...withoutSync } = { ...real, limit: remoteLike.limit }
    for (const limiter of [remoteLike, withoutSync as Limiter]) {
      const rl = createRateLimit({ limiter, key: () => 'one' })
      const remaining = []
      for (let i = 0; i < 4; i++) remaining.push((await rl.check(request('192.0.2.1'))).decision?.remaining)
      expect(remaining.slice(0, 3)).toEqual([2, 1, 0])
      await real.reset('k:one')
    }
    // The first refusal is remembered: limitSync is not tried again.
    expect(calls).toEqual({ limit: 8, limitSync: 1 })
  })

  it('after(value, f, a, b, c) calls f(value, a, b, c): now for a plain value, once settled for a promise', async () => {
    // The per-request steps pass a function made once and their arguments: no closure per request.
    const f = (value: number, a: string, b: string, c: string) => `${value}${a}${b}${c}`
    expect(after(1, f, 'a', 'b', 'c')).toBe('1abc')
    const later = after(Promise.resolve(2), f, 'x', 'y', 'z')
    expect(later).toBeInstanceOf(Promise)
    expect(await later).toBe('2xyz')
  })

  it('never throws: a throwing callback is a rejected promise, from run as from check', async () => {
    const core = createRateLimitCore({
      limiter: perHour(),
      key: () => {
        throw new Error('boom')
      },
    })
    const result = core.run(request('192.0.2.1'))
    expect(result).toBeInstanceOf(Promise)
    await expect(result).rejects.toThrow('boom')
  })

  it('async callbacks still work: skip, key, cost and onLimited may return promises', async () => {
    const rl = createRateLimit({
      limiter: perHour(2),
      skip: async (r) => r.path === '/health',
      key: async (r) => r.header('x-api-key') ?? undefined,
      cost: async () => 1,
      onLimited: async ({ response }) => ({ ...response, body: 'slow down' }),
    })
    expect(await rl.check(request('192.0.2.1', {}, '/health'))).toMatchObject({
      action: 'continue',
      headers: [],
    })
    const answers = []
    for (let i = 0; i < 3; i++) answers.push(await rl.check(request('192.0.2.1', { 'x-api-key': 'a' })))
    expect(answers.map((a) => [a.action, a.key])).toEqual([
      ['continue', 'k:a'],
      ['continue', 'k:a'],
      ['respond', 'k:a'],
    ])
    expect(answers[2]?.response?.body).toBe('slow down')
  })

  it('partition keys are hashed once per key and rendered as rateLimitHeaders does', async () => {
    const clock = manualClock(START)
    const limiter = perHour(3, clock)
    const core = createRateLimitCore({ limiter, partitionKey: true, identity: { secret: 's3cret' } })
    const first = (await core.run(request('192.0.2.1'))) as HttpVerdict
    const second = core.run(request('192.0.2.1'))
    expect(second).not.toBeInstanceOf(Promise)
    const v = second as HttpVerdict
    const expected = rateLimitHeaders(v.decision as Decision, limiter.rules.map(quotaPolicy), {
      nowMs: 0,
      partitionKey: await partitionKeyBytes(v.key as string, 's3cret'),
    })
    expect(v.headers).toEqual(expected)
    expect(first.headers[0]).toEqual(expected[0])
  })
})
