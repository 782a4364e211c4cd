// `edgelimit check`: every error class has a fixture that states where its problem is; good
// policies (and the example) pass; the JSON Schema agrees; the CLI exits 1 on problems.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import { createLimiter, fixedWindow } from 'edgelimit'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { parse } from 'yaml'
import { type RedisServer, redisCommand, startRedis } from '../../edgelimit/test/support/redis.js'
import { startUpstashBridge, type UpstashBridge } from '../../edgelimit/test/support/upstash-bridge.js'
import { checkFiles } from '../src/check.js'
import { parsePolicyText } from '../src/config/source.js'
import { checkSource, ISSUE_CODES, loadPolicy } from '../src/config/validate.js'
import { openStore } from '../src/policy/store.js'
import { GATEWAY_ROOT, REPO_ROOT, runCli } from './support/gateway.js'

const FIXTURES = join(GATEWAY_ROOT, 'test/fixtures')
const bad = readdirSync(join(FIXTURES, 'bad')).filter((f) => f.endsWith('.yaml'))
const good = readdirSync(join(FIXTURES, 'good')).filter((f) => f.endsWith('.yaml'))
const EXAMPLE = join(REPO_ROOT, 'examples/edgelimit.yaml')

/** `# expect: <line> <path> <CODE>` lines of a fixture. */
function expectations(file: string): { line: number; path: string; code: string }[] {
  return [...readFileSync(file, 'utf8').matchAll(/^# expect: (\d+) (\S+) (ERR_[A-Z_]+)$/gm)].map((m) => ({
    line: Number(m[1]),
    path: m[2] as string,
    code: m[3] as string,
  }))
}

describe('bad policies: one fixture per error class', () => {
  test('every issue code but ERR_FILE has exactly one fixture, named after it', () => {
    const codes = bad.map((f) =>
      f
        .replace(/\.yaml$/, '')
        .toUpperCase()
        .replace(/-/g, '_'),
    )
    expect(codes.sort()).toEqual(ISSUE_CODES.filter((c) => c !== 'ERR_FILE').sort())
  })

  test.each(bad)('%s reports exactly its problem, with file, line and path', (name) => {
    const file = join(FIXTURES, 'bad', name)
    const expected = expectations(file)
    expect(expected.length).toBeGreaterThan(0)
    const report = checkFiles([file], {})
    expect(report.ok).toBe(false)
    const problems = report.lines
      .filter((l) => !l.startsWith('✖'))
      .map((l) => {
        const m = /^(.+):(\d+):(\d+) {2}(\S+): .* \[(ERR_[A-Z_]+)\]$/.exec(l)
        expect(m, l).not.toBeNull()
        return { file: m?.[1], line: Number(m?.[2]), path: m?.[4], code: m?.[5] }
      })
    expect(problems).toEqual(expected.map((e) => ({ file: expect.stringContaining(name), ...e })))
  })

  test('a missing file is ERR_FILE', () => {
    const report = checkFiles([join(FIXTURES, 'no-such-policy.yaml')])
    expect(report.ok).toBe(false)
    expect(report.lines[0]).toMatch(
      /no-such-policy\.yaml {2}\(root\): cannot read the file \(ENOENT\) \[ERR_FILE\]$/,
    )
  })

  test('every problem of a file is reported at once', () => {
    const text =
      'version: 3\nrules:\n  - name: a b\n    algorithm: nope\n  - { name: c, algorithm: gcra, limit: 0, period: 1x }\n'
    const { issues } = checkSource(parsePolicyText(text, 'inline.yaml', {}))
    expect(issues.map((i) => `${i.line} ${i.code}`)).toEqual([
      '1 ERR_VERSION',
      '3 ERR_RULE_NAME',
      '4 ERR_UNKNOWN_ALGORITHM',
      '5 ERR_INTEGER',
      '5 ERR_DURATION',
    ])
  })
})

describe('good policies', () => {
  test.each([...good.map((f) => join(FIXTURES, 'good', f)), EXAMPLE])('%s passes', (file) => {
    const report = checkFiles([file], {})
    expect(report.lines.join('\n')).toMatch(/^✔ /)
    expect(report.ok).toBe(true)
  })

  test('ENV substitution: values, defaults, typed numbers, escapes, empty means absent', () => {
    const text = `
upstream: \${UP}
identity: { secret: "\${SECRET:-fallback}" }
admin: { token: "\${TOKEN:-}" }
rules:
  - name: r
    match: { path: "/lit/$\${x}" }
    algorithm: gcra
    limit: \${LIMIT}
    period: 1s
`
    const { config } = checkSource(
      parsePolicyText(text, 'env.yaml', { UP: 'http://127.0.0.1:1', LIMIT: '7' }),
    )
    expect(config?.upstream?.url).toBe('http://127.0.0.1:1')
    expect(config?.identity.secret).toBe('fallback')
    expect(config?.admin.token).toBeUndefined()
    expect(config?.rules[0]?.match.paths).toEqual([`/lit/\${x}`])
    expect(config?.rules[0]?.plans[0]?.algorithm.options.limit).toBe(7)
  })

  test('loadPolicy fills in the stated defaults', () => {
    const { config } = loadPolicy(join(FIXTURES, 'good/minimal.yaml'), {})
    expect(config).toMatchObject({
      store: { type: 'memory', maxKeys: 100_000 },
      headers: ['draft-10'],
      rules: [],
    })
    const example = loadPolicy(EXAMPLE, {}).config
    expect(example.rules.find((r) => r.name === 'login')).toMatchObject({
      onStoreError: 'closed',
      timeout: 45,
      mode: 'enforce',
      key: [{ kind: 'ip' }],
    })
  })
})

describe('check and serve agree', () => {
  // BRIDGE: a REST bridge in front of a real Redis, where serve must also decide through the URL.
  let redis: RedisServer
  let bridge: UpstashBridge
  beforeAll(async () => {
    redis = await startRedis()
    bridge = await startUpstashBridge(redis)
  })
  afterAll(async () => {
    await bridge?.close()
    await redis?.stop()
  })

  test.each([
    'https://example.upstash.io',
    'https://example.upstash.io/',
    'http://127.0.0.1:8079',
    'HTTPS://example.upstash.io',
    'Https://example.upstash.io',
    ' https://example.upstash.io',
    'https://example.upstash.io ',
    'https://example.upstash.io/a b',
    'https://example.upstash.io\n',
    'http://BRIDGE',
    'http://BRIDGE/',
    // The client appends "/pipeline" to the URL as written (one trailing "/" dropped): these
    // failed on every request.
    'http://BRIDGE//',
    'http://BRIDGE/?a=b',
    'http://BRIDGE?',
    'http://BRIDGE#frag',
    'http://BRIDGE/#',
  ])(
    'an Upstash URL %j passes check exactly when the Upstash client takes it and decides through it',
    async (template) => {
      const url = template.replace('BRIDGE', new URL(bridge.url).host)
      const token = template.includes('BRIDGE') ? bridge.token : 't'
      const text = `store: { type: upstash, url: ${JSON.stringify(url)}, token: ${token} }\nrules: []\n`
      const { config, issues } = checkSource(parsePolicyText(text, 'upstash.yaml', {}))
      const works = await openStore({
        type: 'upstash',
        url,
        token,
        prefix: 'edgelimit',
        timeoutMs: 5_000,
      }).then(
        async (handle) => {
          if (!template.includes('BRIDGE')) return true
          const limiter = createLimiter({
            rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1m' }) }],
            store: handle.store,
            timeout: '2s',
            breaker: false,
          })
          return (await limiter.limit(`check-${template}`)).allowed
        },
        () => false,
      )
      expect(config !== undefined, JSON.stringify(issues)).toBe(works)
      if (!works)
        expect(issues).toEqual([expect.objectContaining({ path: ['store', 'url'], code: 'ERR_URL' })])
    },
  )
})

describe('check and serve agree on Redis URLs', () => {
  let redis: RedisServer
  beforeAll(async () => {
    redis = await startRedis()
    await redisCommand(redis.port, ['CONFIG', 'SET', 'requirepass', 'p%w'])
  })
  afterAll(() => redis?.stop())

  const hostPort = () => `127.0.0.1:${redis.port}`
  test.each([
    ['redis://:p%25w@HOST', 'ok'],
    ['redis://:p%25w@HOST/', 'ok'],
    ['redis://:p%25w@HOST/3', 'ok'],
    ['redis://default:p%25w@HOST/0', 'ok'],
    // ioredis decodes the password and threw "URI malformed" when serve opened the store.
    ['redis://:p%w@HOST', 'the user or password'],
    ['redis://u%zz:p%25w@HOST', 'the user or password'],
    // ioredis sent SELECT NaN, and the failed reply crashed the gateway.
    ['redis://:p%25w@HOST/abc', 'expected a database number'],
    ['redis://:p%25w@HOST/1/2', 'expected a database number'],
  ])('%s: %s', async (template, expected) => {
    const url = template.replace('HOST', hostPort())
    const { config, issues } = checkSource(parsePolicyText(`store: "${url}"\nrules: []\n`, 'redis.yaml', {}))
    if (expected !== 'ok') {
      expect(config).toBeUndefined()
      expect(issues).toEqual([
        expect.objectContaining({
          path: ['store'],
          code: 'ERR_URL',
          message: expect.stringContaining(expected),
        }),
      ])
      return
    }
    expect(issues).toEqual([])
    // What check accepts, serve opens and decides through (a real redis-server, with a password).
    const handle = await openStore({ type: 'redis', url, prefix: 'edgelimit' })
    try {
      await handle.ready(5_000)
      const limiter = createLimiter({
        rules: [{ name: 'r', algorithm: fixedWindow({ limit: 1, window: '1m' }) }],
        store: handle.store,
      })
      expect((await limiter.limit(`check-${template}`)).allowed).toBe(true)
    } finally {
      await handle.close()
    }
  })

  test('a Cluster node is an address: a path is refused', () => {
    const { issues } = checkSource(
      parsePolicyText(
        'store: { type: redis-cluster, nodes: ["redis://127.0.0.1:7000/1"] }\nrules: []\n',
        'c.yaml',
        {},
      ),
    )
    expect(issues).toEqual([expect.objectContaining({ path: ['store', 'nodes', 0], code: 'ERR_URL' })])
  })
})

describe('the published JSON Schema', () => {
  const schema = JSON.parse(readFileSync(join(GATEWAY_ROOT, 'schema/edgelimit.schema.json'), 'utf8'))
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema)

  test('the example starts with the yaml-language-server modeline pointing at it', () => {
    expect(readFileSync(EXAMPLE, 'utf8').split('\n')[0]).toBe(
      '# yaml-language-server: $schema=../packages/gateway/schema/edgelimit.schema.json',
    )
  })

  test.each([...good.map((f) => join(FIXTURES, 'good', f)), EXAMPLE])('accepts %s', (file) => {
    expect(validate(parse(readFileSync(file, 'utf8'))), JSON.stringify(validate.errors)).toBe(true)
  })

  const rejected = bad.filter((f) =>
    /^# schema: rejects$/m.test(readFileSync(join(FIXTURES, 'bad', f), 'utf8')),
  )
  test.each(rejected)('rejects %s', (name) => {
    expect(validate(parse(readFileSync(join(FIXTURES, 'bad', name), 'utf8')))).toBe(false)
  })
})

describe('the CLI', () => {
  test('check exits 0 on good files and 1 on bad ones, naming file and line', async () => {
    const ok = await runCli(['check', 'examples/edgelimit.yaml'])
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain('✔ examples/edgelimit.yaml: 5 rules')
    const failed = await runCli([
      'check',
      'examples/edgelimit.yaml',
      'packages/gateway/test/fixtures/bad/err-duration.yaml',
    ])
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain(
      'packages/gateway/test/fixtures/bad/err-duration.yaml:8:13  rules[0].window: expected a duration',
    )
    expect(failed.stderr).toContain('✖ packages/gateway/test/fixtures/bad/err-duration.yaml: 1 problem')
  })

  test('an unknown flag or a bad flag value is a usage error: exit 2 with a message', async () => {
    for (const [args, message] of [
      [['check', '--bogus', 'examples/edgelimit.yaml'], "edgelimit check: Unknown option '--bogus'"],
      [['serve', '--bogus'], "edgelimit serve: Unknown option '--bogus'"],
      [
        ['serve', '--port', 'eighty'],
        'edgelimit serve: --port: expected a port from 0 to 65535, got "eighty"',
      ],
      [['serve', '--drain-timeout', 'soon'], 'edgelimit serve: --drain-timeout: expected a duration'],
    ]) {
      const result = await runCli(args as string[], { timeoutMs: 10_000 })
      expect(result.code, result.stderr).toBe(2)
      expect(result.stderr).toContain(message)
    }
  })

  test('serve refuses an invalid policy with the same report, exit 1', async () => {
    const result = await runCli([
      'serve',
      '--config',
      'packages/gateway/test/fixtures/bad/err-param.yaml',
      '--port',
      '0',
    ])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('err-param.yaml:9:5  rules[0].capacity')
  })
})
