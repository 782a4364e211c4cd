// The rules decide on the request the upstream gets, over real HTTP: a header the gateway strips
// before forwarding is absent to the rules too.
import { createServer as createHttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parseDuration } from 'edgelimit'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { fromIncoming } from '../src/policy/request.js'
import { type InProcess, rawRequest, startInProcess } from './support/gateway.js'
import type { Echo } from './support/origin.js'
import { type Origin, startOrigin } from './support/origin.js'

let origin: Origin
let gw: InProcess

/**
 * The fixed windows' length: they count on the system clock, and a test that spanned the end of
 * one (an hour's at XX:00:00) would see its counts start again.
 */
const WINDOW = farWindow()
const WINDOW_S = (parseDuration(WINDOW) as number) / 1000

const POLICY = `
rules:
  - { name: keyed, match: { path: /keyed }, key: header:x-api-key, algorithm: fixed-window, limit: 2, window: ${WINDOW} }
  - { name: anon, match: { path: /anon, headers: { authorization: false } }, algorithm: fixed-window, limit: 2, window: ${WINDOW} }
  - name: tiered
    match: { path: /tiered }
    key: header:x-user
    algorithm: fixed-window
    window: ${WINDOW}
    tiers: { header: x-plan, default: free, plans: { free: { limit: 1 }, pro: { limit: 3 } } }
  - { name: search, match: { path: /search, methods: [GET] }, algorithm: fixed-window, limit: 3, window: ${WINDOW} }
  - { name: writes, match: { path: /search, methods: [POST] }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: by-user, match: { path: /q }, key: query:user, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
`

// Rules on the forwarding headers, which the gateway sets for the upstream (per identity's trust).
const FORWARDING = `
rules:
  - { name: real-ip, match: { path: /real-ip }, key: header:x-real-ip, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: plain-http, match: { path: /proto, headers: { x-forwarded-proto: http } }, algorithm: fixed-window, limit: 100, window: ${WINDOW} }
  - name: view
    match:
      path: /view
      headers: { x-forwarded-for: "*127.0.0.1", x-forwarded-host: "*", forwarded: false, cf-connecting-ip: false, x_real_ip: false }
    algorithm: fixed-window
    limit: 100
    window: ${WINDOW}
  - { name: by-for, match: { path: /for }, key: "header:x-forwarded-for", algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: by-host, match: { path: /fhost }, key: "header:x-forwarded-host", algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: by-ip, match: { path: /ip }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
`

beforeAll(async () => {
  origin = await startOrigin()
  gw = await startInProcess(POLICY, { upstream: origin.url })
})
afterAll(async () => {
  await gw?.close()
  await origin?.close()
})

/** One request with header lines as given (plus Host); its status, the rules named, what the origin saw. */
async function send(path: string, headers: string[] = [], method = 'GET') {
  const response = await rawRequest(`${gw.url}${path}`, { method, headers })
  const seen =
    response.status === 200 && method !== 'HEAD' ? (JSON.parse(response.body.toString()) as Echo) : undefined
  return { status: response.status, policy: response.headers['ratelimit-policy'], seen }
}

describe('headers the gateway strips are absent to the rules', () => {
  test('a key header named in Connection falls back to the address, as the upstream gets no key', async () => {
    expect((await send('/keyed')).status).toBe(200)
    expect((await send('/keyed')).status).toBe(200)
    expect((await send('/keyed')).status).toBe(429)
    for (let i = 0; i < 3; i++) {
      const sent = await send('/keyed', ['X-Api-Key', `fresh-${i}`, 'Connection', 'close, X-API-Key'])
      expect(sent.status).toBe(429)
    }
    // Sent plainly, the key is the client's own bucket, and the upstream gets it.
    const keyed = await send('/keyed', ['X-Api-Key', 'k1'])
    expect(keyed.status).toBe(200)
    expect(keyed.seen?.headers['x-api-key']).toBe('k1')
  })

  test('a condition on a header named in Connection is decided without it', async () => {
    // `authorization: false`: the anonymous limit. A stripped Authorization leaves the request anonymous.
    const hidden = ['Authorization', 'Bearer x', 'Connection', 'authorization']
    const first = await send('/anon', hidden)
    expect(first).toMatchObject({ status: 200, policy: `"anon";q=2;w=${WINDOW_S}` })
    expect(first.seen?.headers.authorization).toBeUndefined()
    expect((await send('/anon')).status).toBe(200)
    expect((await send('/anon', hidden)).status).toBe(429)
    // Sent plainly, Authorization reaches the upstream and the anonymous rule does not apply.
    const plain = await send('/anon', ['Authorization', 'Bearer x'])
    expect(plain).toMatchObject({ status: 200, policy: undefined })
    expect(plain.seen?.headers.authorization).toBe('Bearer x')
  })

  test('a tier header named in Connection does not choose the plan', async () => {
    const user = ['X-User', 'u1', 'X-Plan', 'pro', 'Connection', 'keep-alive, x-plan']
    expect([(await send('/tiered', user)).status, (await send('/tiered', user)).status]).toEqual([200, 429])
    const pro = ['X-User', 'u2', 'X-Plan', 'pro']
    expect([(await send('/tiered', pro)).status, (await send('/tiered', pro)).status]).toEqual([200, 200])
  })

  test('hop-by-hop headers and Proxy are absent; other headers read as sent', async () => {
    const seen: Record<string, string | undefined>[] = []
    const server = createHttpServer((req, res) => {
      const request = fromIncoming(req)
      seen.push(
        Object.fromEntries(
          [
            'keep-alive',
            'te',
            'proxy-authorization',
            'proxy',
            'expect',
            'connection',
            'upgrade',
            'x-gone',
            'x-kept',
          ].map((name) => [name, request.header(name)]),
        ),
      )
      res.end()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as AddressInfo
      await rawRequest(`http://127.0.0.1:${port}/`, {
        headers: [
          'Keep-Alive',
          'timeout=5',
          'TE',
          'trailers',
          'Proxy-Authorization',
          'Basic Zm9v',
          'Proxy',
          'http://evil',
          'Connection',
          'keep-alive, x-gone',
          'X-Gone',
          '1',
          'X-Kept',
          '2',
        ],
      })
      expect(seen).toEqual([
        {
          'keep-alive': undefined,
          te: undefined,
          'proxy-authorization': undefined,
          proxy: undefined,
          expect: undefined,
          connection: undefined,
          upgrade: undefined,
          'x-gone': undefined,
          'x-kept': '2',
        },
      ])
    } finally {
      server.close()
    }
  })
})

test('a GET rule charges HEAD too (upstreams answer HEAD with the GET handler); other methods are not GET', async () => {
  const head = await send('/search', [], 'HEAD')
  expect(head).toMatchObject({ status: 200, policy: `"search";q=3;w=${WINDOW_S}` })
  expect((await send('/search')).status).toBe(200)
  expect((await send('/search', [], 'HEAD')).status).toBe(200)
  expect((await send('/search', [], 'HEAD')).status).toBe(429)
  expect((await send('/search')).status).toBe(429)
  // A POST rule does not take HEAD (nor does the GET rule take POST).
  expect(await send('/search', ['Content-Length', '0'], 'POST')).toMatchObject({
    status: 200,
    policy: `"writes";q=1;w=${WINDOW_S}`,
  })
})

test('`Connection: host` does not take the Host away from the upstream the rules matched on (preserveHost)', async () => {
  const hosted = await startInProcess(
    `upstream: { url: ${origin.url}, preserveHost: true }
rules: [{ name: api-host, match: { host: api.example.test }, algorithm: fixed-window, limit: 5, window: ${WINDOW} }]
`,
  )
  try {
    const response = await rawRequest(`${hosted.url}/echo`, {
      headers: { host: 'api.example.test', connection: 'close, host' },
    })
    expect(response.headers['ratelimit-policy']).toBe(`"api-host";q=5;w=${WINDOW_S}`)
    expect((JSON.parse(response.body.toString()) as Echo).headers.host).toBe('api.example.test')
  } finally {
    await hosted.close()
  }
})

test('a repeated header reaches the upstream as one line, the value the rules read', async () => {
  const lines = (seen: Echo | undefined, name: string) =>
    (seen?.rawHeaders ?? []).flatMap((h, i, raw) =>
      i % 2 === 0 && h.toLowerCase() === name ? [raw[i + 1]] : [],
    )
  // Node keeps the first of a single-value field (Authorization, Content-Type, User-Agent, …): so
  // do the rules, and the upstream gets that line only, whether it would read the first or the last.
  const keyed = await send('/keyed', [
    'X-Api-Key',
    'junk-1',
    'X-Api-Key',
    'real',
    'Authorization',
    'junk-2',
    'Authorization',
    'Bearer real',
    'Content-Type',
    'text/plain',
    'content-type',
    'application/json',
    'User-Agent',
    'same',
    'User-Agent',
    'same',
  ])
  expect(keyed.status).toBe(200)
  expect(lines(keyed.seen, 'authorization')).toEqual(['junk-2'])
  expect(lines(keyed.seen, 'content-type')).toEqual(['text/plain'])
  expect(lines(keyed.seen, 'user-agent')).toEqual(['same'])
  // Other fields (lists, RFC 9110 §5.3, or unknown) are joined, as the rules read them: the key is `junk-1, real`.
  expect(lines(keyed.seen, 'x-api-key')).toEqual(['junk-1, real'])
  const again = await send('/keyed', ['X-Api-Key', 'junk-1, real'])
  expect(again.status).toBe(200)
  expect((await send('/keyed', ['X-Api-Key', 'junk-1', 'X-Api-Key', 'real'])).status).toBe(429)
  expect((await send('/keyed', ['X-Api-Key', 'real'])).status).toBe(200)
  // Cookie lines are joined with `; ` (RFC 6265 §5.4), as Node reads them.
  const cookies = await send('/other', ['Cookie', 'a=1', 'Cookie', 'b=2'])
  expect(lines(cookies.seen, 'cookie')).toEqual(['a=1; b=2'])
})

test('a header past the first 1,000 lines is read by the rules as the upstream gets it', async () => {
  // Node's request keeps 1,000 lines in `headers` by default (maxHeadersCount), and more in
  // `rawHeaders`, which the upstream gets: the rules would not see the Authorization below.
  const filler = Array.from({ length: 1000 }, (_, i) => [`x-f${i}`, '1']).flat()
  const late = await send('/anon', [...filler, 'Authorization', 'Bearer late'])
  expect(late.status).toBe(200)
  // (The origin is a Node server too: its `rawHeaders` has the line.)
  expect(late.seen?.rawHeaders.slice(-12)).toContain('Bearer late')
  // Not anonymous: the `authorization: false` rule does not apply.
  expect(late.policy).toBeUndefined()
})

test('query keys read the first occurrence (as nginx $arg_); the query reaches the upstream as sent', async () => {
  const first = await send('/q?user=ann&user=bob')
  expect(first.status).toBe(200)
  expect(first.seen?.url).toBe('/q?user=ann&user=bob')
  expect((await send('/q?user=ann')).status).toBe(429)
  expect((await send('/q?user=bob')).status).toBe(200)
  // `user[]` is another parameter: keyed by the address (here its first request, so admitted).
  expect((await send('/q?user[]=bob')).status).toBe(200)
  expect((await send('/q?user[]=carl')).status).toBe(429)
})

test('methods: reads the request method, never X-HTTP-Method-Override', async () => {
  // The POST rule (its one request spent above) applies, the GET rule does not.
  const post = await send('/search', ['Content-Length', '0', 'X-HTTP-Method-Override', 'GET'], 'POST')
  expect(post).toMatchObject({ status: 429, policy: `"writes";q=1;w=${WINDOW_S}` })
})

describe('forwarding headers are read as the upstream gets them, not as the client sent them', () => {
  type Send = (path: string, headers?: string[], method?: string) => ReturnType<typeof sendTo>
  /** Starts a gateway on FORWARDING with `identity`, runs `body` against it, closes it. */
  async function withGateway(identity: string, body: (send: Send) => Promise<void>) {
    const gateway = await startInProcess(`${identity}${FORWARDING}`, { upstream: origin.url })
    try {
      await body((path, headers, method) => sendTo(gateway.url, path, headers, method))
    } finally {
      await gateway.close()
    }
  }
  async function sendTo(base: string, path: string, headers: string[] = [], method = 'GET') {
    const response = await rawRequest(`${base}${path}`, { method, headers })
    const seen = response.status === 200 ? (JSON.parse(response.body.toString()) as Echo) : undefined
    return { status: response.status, policy: response.headers['ratelimit-policy'], seen }
  }
  const CLAIMS = [
    'X-Forwarded-For',
    '203.0.113.9',
    'X-Forwarded-Host',
    'evil.example',
    'Forwarded',
    'for=203.0.113.9',
    'CF-Connecting-IP',
    '203.0.113.9',
    'X_Real_IP',
    '203.0.113.9',
  ]

  test('from a peer that is no trusted proxy, its claims are not read: the gateway sets its own', async () => {
    await withGateway('', async (send) => {
      // X-Real-IP never reaches the upstream: the key falls back to the address, whatever is sent.
      const first = await send('/real-ip', ['X-Real-IP', '198.51.100.1'])
      expect(first.status).toBe(200)
      expect(first.seen?.headers['x-real-ip']).toBeUndefined()
      for (let i = 2; i < 5; i++)
        expect((await send('/real-ip', ['X-Real-IP', `198.51.100.${i}`])).status).toBe(429)
      // The upstream is told `http`, so a rule on plain HTTP applies to a client claiming https.
      const proto = await send('/proto', ['X-Forwarded-Proto', 'https'])
      expect(proto).toMatchObject({ status: 200, policy: `"plain-http";q=100;w=${WINDOW_S}` })
      expect(proto.seen?.headers['x-forwarded-proto']).toBe('http')
      // X-Forwarded-For is the peer, X-Forwarded-Host the Host; Forwarded and the others are gone.
      const view = await send('/view', CLAIMS)
      expect(view).toMatchObject({ status: 200, policy: `"view";q=100;w=${WINDOW_S}` })
      expect(view.seen?.headers['x-forwarded-for']).toBe('127.0.0.1')
      // A forged X-Forwarded-For or X-Forwarded-Host buys no fresh bucket.
      expect((await send('/for', ['X-Forwarded-For', '203.0.113.1'])).status).toBe(200)
      expect((await send('/for', ['X-Forwarded-For', '203.0.113.2'])).status).toBe(429)
      expect((await send('/for')).status).toBe(429)
      expect((await send('/fhost', ['X-Forwarded-Host', 'a.example'])).status).toBe(200)
      expect((await send('/fhost', ['X-Forwarded-Host', 'b.example'])).status).toBe(429)
    })
  })

  test('from a trusted proxy, its claims are read as passed on, X-Forwarded-For with the peer appended', async () => {
    await withGateway('identity: { trustedProxies: [127.0.0.1/32] }\n', async (send) => {
      // X-Real-IP reaches the upstream as sent: each address is its own bucket.
      for (let i = 1; i < 4; i++) {
        const sent = await send('/real-ip', ['X-Real-IP', `198.51.100.${i}`])
        expect(sent.status).toBe(200)
        expect(sent.seen?.headers['x-real-ip']).toBe(`198.51.100.${i}`)
      }
      expect((await send('/real-ip', ['X-Real-IP', '198.51.100.1'])).status).toBe(429)
      // X-Forwarded-Proto passes as sent; absent, the gateway's `http` is added, and read.
      expect(await send('/proto', ['X-Forwarded-Proto', 'https'])).toMatchObject({
        status: 200,
        policy: undefined,
      })
      expect(await send('/proto')).toMatchObject({ status: 200, policy: `"plain-http";q=100;w=${WINDOW_S}` })
      // A claimed Forwarded, CF-Connecting-IP passes (the view rule no longer applies); the
      // underscore spelling never does, from anyone.
      const view = await send('/view', ['X_Real_IP', '203.0.113.9'])
      expect(view).toMatchObject({ status: 200, policy: `"view";q=100;w=${WINDOW_S}` })
      expect((await send('/view', CLAIMS)).policy).toBeUndefined()
      // The key reads `203.0.113.1, 127.0.0.1`, as the upstream does: not the bare peer's bucket.
      const chained = await send('/for', ['X-Forwarded-For', '203.0.113.1'])
      expect(chained.seen?.headers['x-forwarded-for']).toBe('203.0.113.1, 127.0.0.1')
      expect(chained.status).toBe(200)
      expect((await send('/for', ['X-Forwarded-For', '203.0.113.2'])).status).toBe(200)
      expect((await send('/for')).status).toBe(200)
      expect((await send('/for', ['X-Forwarded-For', '203.0.113.1'])).status).toBe(429)
      expect((await send('/for')).status).toBe(429)
      // X-Forwarded-Host passes as sent; absent, the gateway's (the Host) is read.
      expect((await send('/fhost', ['X-Forwarded-Host', 'a.example'])).status).toBe(200)
      expect((await send('/fhost', ['X-Forwarded-Host', 'b.example'])).status).toBe(200)
      expect((await send('/fhost', ['X-Forwarded-Host', 'a.example'])).status).toBe(429)
    })
  })

  test('client identity still reads the chain the proxies sent (a hop count counts no gateway hop)', async () => {
    await withGateway('identity: { trustedProxies: 1 }\n', async (send) => {
      expect((await send('/ip', ['X-Forwarded-For', '198.51.100.1'])).status).toBe(200)
      expect((await send('/ip', ['X-Forwarded-For', '198.51.100.2'])).status).toBe(200)
      expect((await send('/ip', ['X-Forwarded-For', '10.0.0.1, 198.51.100.2'])).status).toBe(429)
    })
  })
})
