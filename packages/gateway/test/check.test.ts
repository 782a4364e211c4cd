// `edgelimit check`: every error class has a fixture that states where its problem is; good
// policies (and the example) pass; the JSON Schema agrees; the CLI exits 1 on problems.
import { closeSync, openSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import { algorithmSpec, createLimiter, fixedWindow } from 'edgelimit'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { parse, parseDocument } from 'yaml'
import { type RedisServer, redisCommand, startRedis } from '../../edgelimit/test/support/redis.js'
import { upstashFixture } from '../../edgelimit/test/support/redis-client.js'
import { checkFiles } from '../src/check.js'
import { parsePolicyText } from '../src/config/source.js'
import { checkSource, ISSUE_CODES, loadPolicy, validatePolicy } from '../src/config/validate.js'
import { compilePolicy } from '../src/policy/compile.js'
import { openStore } from '../src/policy/store.js'
import { GATEWAY_ROOT, REPO_ROOT, runCli, tempDir, writePolicy } from './support/gateway.js'

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

  test('a file of two YAML documents (a second `---`) says so, placed at the second, in words for its editor', () => {
    const file = writePolicy(tempDir(), 'version: 1\nrules: []\n---\nversion: 1\nrules: []\n')
    const report = checkFiles([file])
    expect(report.ok).toBe(false)
    expect(report.lines[0]).toMatch(
      /edgelimit\.yaml:3:1 {2}\(root\): YAML: the file holds more than one document \(`---` at line 3\); a policy is one document \[ERR_YAML\]$/,
    )
    // Nothing of the parser's own API (`YAML.parseAllDocuments()`), which an operator cannot call.
    expect(report.lines.join('\n')).not.toMatch(/parseAllDocuments/)
    // One document that starts (or ends) with its marker is one policy.
    const one = writePolicy(tempDir(), '---\nversion: 1\nrules: []\n...\n')
    expect(checkFiles([one]).ok).toBe(true)
    // A second document after an end marker has no `---` to point at.
    const ended = writePolicy(tempDir(), 'version: 1\nrules: []\n...\nversion: 1\n')
    expect(checkFiles([ended]).lines[0]).toMatch(
      /edgelimit\.yaml:4:1 {2}\(root\): YAML: the file holds more than one document \(the second, after `\.\.\.`, at line 4\); a policy is one document \[ERR_YAML\]$/,
    )
  })

  test('a policy file above 1 MiB is ERR_FILE, refused by its size before it is read or parsed', async () => {
    const dir = tempDir()
    const line = '  - { name: r, algorithm: fixed-window, limit: 1, window: 1s }\n'
    // 50 MB of rules: parsing it would take minutes and exhaust the heap.
    const big = writePolicy(
      dir,
      `version: 1\nrules:\n${line.repeat(Math.ceil(50e6 / line.length))}`,
      'big.yaml',
    )
    const size = statSync(big).size
    const check = await runCli(['check', big], { timeoutMs: 10_000 })
    expect(check.code, check.stderr).toBe(1)
    expect(check.stderr).toMatch(
      new RegExp(
        `big\\.yaml {2}\\(root\\): file too large: ${size} bytes, at most 1048576 \\(1 MiB\\) \\[ERR_FILE\\]\n`,
      ),
    )
    expect(check.stderr).not.toMatch(/heap| {4}at /)
    // Every command that loads a policy refuses it the same way (a policy error: exit 2).
    const replay = await runCli(['replay', '-', '-c', big, '--no-html'], { timeoutMs: 10_000, stdin: '' })
    expect(replay.code, replay.stderr).toBe(2)
    expect(replay.stderr).toContain(`file too large: ${size} bytes, at most 1048576 (1 MiB) [ERR_FILE]`)
    // A stream has no size to read first: it is read up to the bound, then refused.
    const stream = await runCli(['check', '/dev/zero'], { timeoutMs: 10_000 })
    expect(stream.code, stream.stderr).toBe(1)
    expect(stream.stderr).toMatch(
      /^\/dev\/zero {2}\(root\): file too large: more than 1048576 bytes, at most 1048576 \(1 MiB\) \[ERR_FILE\]$/m,
    )
    // 1 MiB exactly is read.
    const head = 'version: 1\nrules: []\n'
    const full = writePolicy(dir, `${head}#${'x'.repeat(1024 * 1024 - head.length - 2)}\n`, 'full.yaml')
    expect(statSync(full).size).toBe(1024 * 1024)
    expect(checkFiles([full]).lines).toEqual([expect.stringMatching(/full\.yaml: 0 rules, memory store$/)])
  })

  test('a file with thousands of problems shows the first 1,000 of them, then how many more', async () => {
    const dir = tempDir()
    const file = writePolicy(dir, `version: 1\nrules:\n${'- 1\n'.repeat(2500)}`, 'many.yaml')
    const report = checkFiles([file], {})
    expect(report.lines).toHaveLength(1002)
    expect(report.lines[999]).toMatch(
      /many\.yaml:1002:3 {2}rules\[999\]: expected a mapping .* \[ERR_OBJECT\]$/,
    )
    expect(report.lines.slice(1000)).toEqual(['… and 1500 more', `✖ ${file}: 2500 problems`])
    // So does a command that loads the policy.
    const replay = await runCli(['replay', '-', '-c', file, '--no-html'], { timeoutMs: 20_000, stdin: '' })
    expect(replay.code, replay.stderr).toBe(2)
    expect(replay.stderr).toContain('Invalid policy (2500 problems):')
    expect(replay.stderr).toContain('rules[999]: expected a mapping')
    expect(replay.stderr).not.toContain('rules[1000]')
    expect(replay.stderr).toContain('  … and 1500 more\n')
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

describe('keys named like Object.prototype members', () => {
  const HIDDEN = `version: 1
store: memory
identity: { secret: x }
__proto__: { admin: { token: hidden-token } }
rules:
  - name: login
    algorithm: fixed-window
    window: 1m
    __proto__: { limit: 3 }
`

  test('a `__proto__:` key is an unknown field, and what it holds is not read (no limit, no admin token)', () => {
    const { value } = parsePolicyText(HIDDEN, 'proto.yaml', {}) as { value: Record<string, unknown> }
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
    expect([value.admin, (value.rules as Record<string, unknown>[])[0]?.limit]).toEqual([
      undefined,
      undefined,
    ])
    const file = writePolicy(tempDir(), HIDDEN, 'proto.yaml')
    const report = checkFiles([file], {})
    expect(report.ok).toBe(false)
    // Each line without its file name (the last line is `✖ <file>: 3 problems`).
    expect(report.lines.map((l) => l.replace(/^.*proto\.yaml:/, ''))).toEqual([
      expect.stringMatching(/^4:1 {2}__proto__: unknown field "__proto__"; .* \[ERR_UNKNOWN_FIELD\]$/),
      expect.stringMatching(/^6:5 {2}rules\[0\]\.limit: .*required.* \[ERR_REQUIRED\]$/),
      expect.stringMatching(/^9:5 {2}rules\[0\]\.__proto__: unknown field .* \[ERR_UNKNOWN_FIELD\]$/),
      ' 3 problems',
    ])
  })

  test('through a merge key (`<<`) as well; `constructor` and `prototype` are unknown fields too', () => {
    const text = `base: &base { __proto__: { limit: 3 }, constructor: 1, prototype: 2 }
rules:
  - { name: a, algorithm: fixed-window, window: 1m, <<: *base }
`
    const { config, issues } = checkSource(parsePolicyText(text, 'merge.yaml', {}))
    expect(config).toBeUndefined()
    expect(issues.map((i) => `${i.path.join('.')} ${i.code}`).sort()).toEqual([
      'base ERR_UNKNOWN_FIELD',
      'rules.0.__proto__ ERR_UNKNOWN_FIELD',
      'rules.0.constructor ERR_UNKNOWN_FIELD',
      'rules.0.limit ERR_REQUIRED',
      'rules.0.prototype ERR_UNKNOWN_FIELD',
    ])
  })

  // Every mapping of the full policy, the free-form ones (tiers.keys, tiers.plans, match.headers) too.
  const FULL = readFileSync(join(FIXTURES, 'good/full.yaml'), 'utf8')
  const mappings = (value: unknown, at: (string | number)[] = []): (string | number)[][] => {
    if (value === null || typeof value !== 'object') return []
    const inner = Object.entries(value).flatMap(([k, v]) =>
      mappings(v, [...at, Array.isArray(value) ? Number(k) : k]),
    )
    return Array.isArray(value) ? inner : [at, ...inner]
  }
  const MAPPINGS = mappings(parsePolicyText(FULL, 'full.yaml', {}).value)

  test.each(MAPPINGS.map((p) => [p.join('.') || '(root)', p] as const))(
    'a `__proto__` mapping added at %s is reported at its own path',
    (_, path) => {
      const doc = parseDocument(FULL)
      doc.setIn([...path, '__proto__'], doc.createNode({ limit: 3, token: 'x', url: 'http://a' }))
      const { config, issues } = checkSource(parsePolicyText(doc.toString(), 'full.yaml', {}))
      expect(config).toBeUndefined()
      expect(issues.filter((i) => i.path.join('.') === [...path, '__proto__'].join('.'))).not.toEqual([])
    },
  )
})

describe('secrets are never printed', () => {
  const SECRETS = `version: 1
store:
  type: upstash
  url: https://eu1.upstash.io
  token: \${UPSTASH_TOKEN}
identity:
  secret: \${KEY_SECRET}
admin:
  token: \${ADMIN_TOKEN}
rules: []
`

  test('a secret or token from the environment stays text, even when it looks like a number', () => {
    const env = { KEY_SECRET: '20251130', ADMIN_TOKEN: '0x7f3a9c41', UPSTASH_TOKEN: '1e3' }
    const file = writePolicy(tempDir(), SECRETS, 'secrets.yaml')
    expect(checkFiles([file], env).lines).toEqual([expect.stringMatching(/^✔ /)])
    const { config } = loadPolicy(file, env)
    expect([config.identity.secret, config.admin.token, config.store]).toEqual([
      '20251130',
      '0x7f3a9c41',
      expect.objectContaining({ token: '1e3' }),
    ])
  })

  test('a secret, token or URL credential of the wrong form is refused without its value', () => {
    const text = `version: 1
upstream: ftp://ops:hunter2-up@files.example.com
store: { type: upstash, url: "https://user:hunter2-url@eu1.upstash.io/?token=hunter2-query", token: 20251130 }
identity: { secret: 4242424242 }
admin: { token: 0x7f3a9c41 }
rules: []
`
    const file = writePolicy(tempDir(), text, 'wrong.yaml')
    const report = checkFiles([file], {})
    expect(report.ok).toBe(false)
    const lines = report.lines.map((l) => l.replace(/^.*wrong\.yaml:/, ''))
    expect(lines).toEqual([
      expect.stringMatching(
        /^2:11 {2}upstream: expected a URL .*, got "ftp:\/\/\*\*\*@files\.example\.com" \(string\) \[ERR_URL\]$/,
      ),
      expect.stringMatching(
        // http:// is taken too (a local REST bridge): the message says so.
        /^3:30 {2}store\.url: .*\(https:\/\/ or http:\/\/, in lower case, .*, got "https:\/\/\*\*\*@eu1\.upstash\.io\/\?\*\*\*" \(string\) \[ERR_URL\]$/,
      ),
      expect.stringMatching(
        /^3:101 {2}store\.token: expected a non-empty string, got a number \(value hidden\) \[ERR_STRING\]$/,
      ),
      expect.stringMatching(
        /^4:21 {2}identity\.secret: expected a non-empty string, got a number \(value hidden\) \[ERR_STRING\]$/,
      ),
      expect.stringMatching(
        /^5:17 {2}admin\.token: expected a non-empty string, got a number \(value hidden\) \[ERR_STRING\]$/,
      ),
      ' 5 problems',
    ])
    for (const secret of ['hunter2', '20251130', '4242424242', '2134547521', '0x7f3a9c41'])
      expect(report.lines.join('\n')).not.toContain(secret)
  })

  test('an upstream URL with a user, password, query or fragment is refused, naming the field, without the password', () => {
    // The gateway would send none of them: refused, not dropped (docs/decisions/0015).
    const text = `version: 1
upstream: { url: "http://ops:hunter2-up@app.internal:3000/base?tenant=t1&key=hunter2-q" }
rules: []
`
    const file = writePolicy(tempDir(), text, 'creds.yaml')
    const report = checkFiles([file], {})
    expect(report.ok).toBe(false)
    const masked = '"http://***@app.internal:3000/base?***" (string)'
    expect(report.lines.map((l) => l.replace(/^.*creds\.yaml:/, ''))).toEqual([
      `2:18  upstream.url: expected an upstream URL without a user or password, got ${masked}: the gateway sends no credentials of its own; remove them (a client's own Authorization header reaches the upstream as sent) [ERR_URL]`,
      `2:18  upstream.url: expected an upstream URL without a query or fragment, got ${masked}: each request reaches the upstream with its own query, and the gateway adds none; remove it (the URL's path is a prefix: "http://app/base" and "/x?y=1" make "/base/x?y=1") [ERR_URL]`,
      ' 2 problems',
    ])
    expect(report.lines.join('\n')).not.toContain('hunter2')
    // The short form, and each part alone.
    for (const [url, problems] of [
      ['http://u:pw@x', ['without a user or password']],
      ['http://u@x/base', ['without a user or password']],
      ['https://x/base?q=1', ['without a query or fragment']],
      ['https://x/#top', ['without a query or fragment']],
    ] as const) {
      const { issues } = checkSource(parsePolicyText(`upstream: "${url}"\nrules: []\n`, 'u.yaml', {}))
      expect(issues.map((i) => [i.path, i.code, i.message.replace(/, got .*/, '')])).toEqual(
        problems.map((p) => [['upstream'], 'ERR_URL', `expected an upstream URL ${p}`]),
      )
    }
    // Nothing that would be sent is refused: a path prefix, an `@` in the path.
    for (const url of ['http://x:3000/base/', 'http://x/a@b', 'https://[::1]:8443'])
      expect(checkSource(parsePolicyText(`upstream: "${url}"\nrules: []\n`, 'u.yaml', {})).issues).toEqual([])
  })

  test('nor the password of a Redis URL that is refused', () => {
    const urls = [
      'redis//:hunter2@cache:6379',
      'redis://:hunter2@cache:6379/zero',
      'redis://user:hunter2@cache:6379/0?password=hunter2',
      'rediss:/user:hunter2@cache',
    ]
    for (const url of urls) {
      for (const store of [
        `"${url}"`,
        `{ type: redis, url: "${url}" }`,
        `{ type: redis-cluster, nodes: ["${url}"] }`,
      ]) {
        const { config, issues } = checkSource(parsePolicyText(`store: ${store}\nrules: []\n`, 'r.yaml', {}))
        if (config !== undefined) continue
        expect(issues.map((i) => i.message).join('\n')).not.toContain('hunter2')
      }
    }
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

  test('a quoted placeholder is read as a number or true/false where one is due (flow mappings need the quotes)', () => {
    const text = `
upstream: { url: "http://x", connections: "\${C:-4}", preserveHost: "\${P:-true}", timeout: "\${T:-1500}" }
clients: { maxBodySize: "\${S:-1024}" }
identity: { trustedProxies: "\${H:-1}", ipv6Prefix: "\${V6:-56}", fallback: "\${F:-7}" }
headers: "\${NO_HEADERS:-false}"
rules:
  - name: r
    match: { headers: { x-debug: "\${D:-true}" } }
    algorithm: token-bucket
    refillInterval: "\${I:-250}"
    timeout: "\${TO:-false}"
    enforce: "\${E:-50}"
    tiers:
      header: x-plan
      default: "\${DEFAULT_PLAN:-7}"
      plans: { "7": { capacity: "\${CAP:-5}", refillRate: "\${RATE:-1}" } }
`
    const { config, issues } = checkSource(parsePolicyText(text, 'quoted.yaml', { CAP: '9' }))
    expect(issues).toEqual([])
    expect(config?.upstream).toMatchObject({ connections: 4, preserveHost: true, timeoutMs: 1500 })
    expect(config?.clients.maxBodySize).toBe(1024)
    expect(config?.identity).toMatchObject({ trustedProxies: 1, ipv6Prefix: 56, fallback: '7' })
    expect(config?.headers).toEqual([])
    const rule = config?.rules[0]
    expect([rule?.timeout, rule?.enforce]).toEqual([false, 50])
    expect(rule?.plans[0]?.algorithm.options).toMatchObject({
      capacity: 9,
      refillRate: 1,
      refillInterval: 250,
    })
    // Where text means something of its own, quotes keep it text: a header value glob, a plan name.
    expect(rule?.match.headers).toEqual([['x-debug', 'true']])
    expect(rule?.tiers?.default).toBe('7')
  })

  test('a default that holds another placeholder is refused, not cut at its first "}" (the token "abc}")', () => {
    const text = `
admin: { token: "\${TOKEN:-\${OTHER}}" }
rules:
  - name: r
    algorithm: gcra
    limit: \${LIMIT:-\${DEFAULT_LIMIT}}
    period: 1s
`
    for (const env of [{}, { TOKEN: 'abc', LIMIT: '7', OTHER: 'x', DEFAULT_LIMIT: '3' }]) {
      const { config, issues } = checkSource(parsePolicyText(text, 'nested.yaml', env))
      expect(config).toBeUndefined()
      expect(issues.map((i) => [i.path.join('.'), i.code, i.line])).toEqual([
        ['admin.token', 'ERR_ENV', 2],
        ['rules.0.limit', 'ERR_ENV', 6],
      ])
      expect(issues[0]?.message).toContain('nested placeholders are not supported')
    }
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

describe('a cost no request can ever pay', () => {
  const issuesOf = (text: string) =>
    checkSource(parsePolicyText(text, 'cost.yaml', {})).issues.map(
      (i) => `${i.line} ${i.path.join('.')} ${i.code} ${i.message}`,
    )
  // One row per algorithm family: its parameters, the most one request may cost, how the refusal
  // names what bounds it, and which parameter to raise.
  test.each([
    ['fixed-window', 'limit: 3, window: 1h', 3, 'fixed-window limit 3', 'limit'],
    ['sliding-log', 'limit: 3, window: 1h', 3, 'sliding-log limit 3', 'limit'],
    ['sliding-window', 'limit: 3, window: 1h', 3, 'sliding-window limit 3', 'limit'],
    ['token-bucket', 'capacity: 3, refillRate: 1', 3, 'token-bucket capacity 3', 'capacity'],
    ['leaky-bucket', 'capacity: 3, leakRate: 1', 3, 'leaky-bucket capacity 3', 'capacity'],
    // A shaping queue of 3 admits a fresh request of 4: its last unit starts within the queue.
    [
      'leaky-bucket',
      'capacity: 3, leakRate: 1, shape: true',
      4,
      'shaping leaky-bucket capacity 3',
      'capacity',
    ],
    ['gcra', 'limit: 10, period: 1s, burst: 3', 3, 'gcra burst 3', 'burst'],
    ['gcra', 'limit: 3, period: 1s', 3, 'gcra burst 3', 'burst'],
  ])(
    '%s { %s }: cost %i passes, one more is refused at rules[1].cost',
    (algorithm, params, most, bound, raise) => {
      const policy = (cost: number) => `rules:
  - { name: big, algorithm: fixed-window, limit: 100, window: 5m }
  - { name: small, algorithm: ${algorithm}, ${params}, cost: ${cost} }
`
      expect(issuesOf(policy(most))).toEqual([])
      expect(issuesOf(policy(most + 1))).toEqual([
        `3 rules.1.cost ERR_COST_NEVER_ADMITTED ${most + 1} can never pass rule "small" (${bound} admits at most ${most} per request); lower the cost or raise the ${raise}`,
      ])
      // The library itself refuses that cost for ever, and takes the one below.
      const spec = algorithmSpec({
        algorithm,
        options: parse(`{ ${params.replace('shape: true', 'mode: shape')} }`),
      })
      const limiter = createLimiter({ rules: [{ name: 'small', algorithm: spec }] })
      expect(limiter.limitSync('a', { cost: most }).allowed).toBe(true)
      expect(limiter.limitSync('b', { cost: most + 1 }).reason).toBe('cost-exceeds-limit')
    },
  )

  test('a cost set in defaults is refused there, naming each rule it can never pass; a rule of its own cost is not', () => {
    const text = `defaults: { cost: 5 }
rules:
  - { name: wide, algorithm: fixed-window, limit: 10, window: 1m }
  - { name: narrow, algorithm: token-bucket, capacity: 4, refillRate: 1 }
  - { name: own, algorithm: gcra, limit: 2, period: 1s, cost: 1 }
  - { name: also, algorithm: sliding-log, limit: 2, window: 1m }
`
    expect(issuesOf(text)).toEqual([
      '1 defaults.cost ERR_COST_NEVER_ADMITTED 5 can never pass rule "narrow" (token-bucket capacity 4 admits at most 4 per request); lower the cost or raise the capacity',
      '1 defaults.cost ERR_COST_NEVER_ADMITTED 5 can never pass rule "also" (sliding-log limit 2 admits at most 2 per request); lower the cost or raise the limit',
    ])
    // A rule's own invalid cost is reported as such, not as the default's it falls back to.
    const typo = checkSource(
      parsePolicyText(
        'defaults: { cost: 5 }\nrules: [{ name: t, algorithm: gcra, limit: 2, period: 1s, cost: -1 }]\n',
        'typo.yaml',
        {},
      ),
    ).issues
    expect(typo.map((i) => `${i.path.join('.')} ${i.code}`)).toEqual(['rules.0.cost ERR_INTEGER'])
  })

  test('each plan of a tiered rule is checked, named by its tier; cost 0 (only look) always passes', () => {
    const tiered = (cost: number) => `rules:
  - name: api
    algorithm: token-bucket
    refillRate: 1
    cost: ${cost}
    tiers:
      header: x-plan
      default: free
      plans: { free: { capacity: 2 }, pro: { capacity: 50 } }
`
    expect(issuesOf(tiered(3))).toEqual([
      '5 rules.0.cost ERR_COST_NEVER_ADMITTED 3 can never pass rule "api" tier "free" (token-bucket capacity 2 admits at most 2 per request); lower the cost or raise the capacity',
    ])
    expect(issuesOf(tiered(2))).toEqual([])
    expect(issuesOf(tiered(0))).toEqual([])
  })

  test('`edgelimit check` reports it with file, line and path (the case of a request that can never pass)', () => {
    const file = writePolicy(
      tempDir(),
      `rules:
  - { name: big, algorithm: fixed-window, limit: 10, window: 5m }
  - { name: small, algorithm: fixed-window, limit: 3, window: 5m, cost: 5 }
`,
      'cost.yaml',
    )
    const report = checkFiles([file], {})
    expect(report.ok).toBe(false)
    expect(report.lines[0]).toMatch(
      /cost\.yaml:3:73 {2}rules\[1\]\.cost: 5 can never pass rule "small" \(fixed-window limit 3 admits at most 3 per request\); lower the cost or raise the limit \[ERR_COST_NEVER_ADMITTED\]$/,
    )
  })
})

describe('a syncInterval on a rule that does not sync', () => {
  const issuesOf = (text: string) =>
    checkSource(parsePolicyText(text, 'sync.yaml', {})).issues.map(
      (i) => `${i.line} ${i.path.join('.')} ${i.code} ${i.message}`,
    )
  const refused = (line: number, index: number, consistency: string) =>
    `${line} rules.${index}.syncInterval ERR_SYNC_INTERVAL needs consistency: approximate, or drop it (only approximate rules sync; this one is ${consistency})`
  const fw = 'algorithm: fixed-window, limit: 5, window: 1m'

  test("is refused on a strict or local rule (its own consistency or the defaults'), with every other problem", () => {
    expect(
      issuesOf(`rules:
  - { name: a, ${fw}, syncInterval: 1s }
  - { name: b, ${fw}, consistency: strict, syncInterval: 1s }
  - { name: c, ${fw}, consistency: local, syncInterval: 1s }
  - { name: d, ${fw}, cost: -1 }
`),
    ).toEqual([
      refused(2, 0, '"strict", the default'),
      refused(3, 1, '"strict"'),
      refused(4, 2, '"local"'),
      '5 rules.3.cost ERR_INTEGER expected a non-negative integer up to 9007199254740991, got -1 (number)',
    ])
    expect(
      issuesOf(`defaults: { consistency: local }
rules:
  - { name: a, ${fw}, syncInterval: 1s }
`),
    ).toEqual([refused(3, 0, '"local", the default')])
  })

  test("is taken on an approximate rule, and from defaults, where it is the approximate rules' interval", () => {
    const ok = (text: string) => {
      const { config, issues } = checkSource(parsePolicyText(text, 'sync.yaml', {}))
      expect(issues).toEqual([])
      return config?.rules.map((r) => [r.name, r.consistency, r.syncIntervalMs])
    }
    expect(ok(`rules:\n  - { name: a, ${fw}, consistency: approximate, syncInterval: 1s }\n`)).toEqual([
      ['a', 'approximate', 1000],
    ])
    expect(
      ok(`defaults: { consistency: approximate }
rules:
  - { name: a, ${fw}, syncInterval: 1s }
  - { name: b, ${fw} }
`),
    ).toEqual([
      ['a', 'approximate', 1000],
      ['b', 'approximate', 250],
    ])
    expect(
      ok(`defaults: { syncInterval: 2s }
rules:
  - { name: a, ${fw} }
  - { name: b, ${fw}, consistency: approximate }
`),
    ).toEqual([
      ['a', 'strict', 2000],
      ['b', 'approximate', 2000],
    ])
  })

  test('one problem where another is already reported: a consistency refused, an interval that is no duration', () => {
    expect(issuesOf(`rules:\n  - { name: a, ${fw}, consistency: eventual, syncInterval: 1s }\n`)).toEqual([
      '2 rules.0.consistency ERR_CHOICE expected one of "strict", "local", "approximate", got "eventual" (string)',
    ])
    expect(
      issuesOf(`defaults: { consistency: eventual }\nrules:\n  - { name: a, ${fw}, syncInterval: 1s }\n`),
    ).toEqual([
      '1 defaults.consistency ERR_CHOICE expected one of "strict", "local", "approximate", got "eventual" (string)',
    ])
    expect(
      issuesOf(`rules:\n  - { name: a, ${fw}, syncInterval: 1 sec }\n`).map((i) => i.split(' ')[2]),
    ).toEqual(['ERR_DURATION'])
  })

  test('a policy of strict rules with a default syncInterval serves: the library is not handed the interval', async () => {
    const { config } = checkSource(
      parsePolicyText(`defaults: { syncInterval: 2s }\nrules:\n  - { name: a, ${fw} }\n`, 'sync.yaml', {}),
    )
    const store = await openStore({ type: 'memory', maxKeys: 10 })
    try {
      expect(() => compilePolicy(config as NonNullable<typeof config>, store)).not.toThrow()
    } finally {
      await store.close()
    }
  })
})

describe('check and serve agree', () => {
  // BRIDGE: a REST bridge in front of a real Redis, where serve must also decide through the URL.
  const upstash = upstashFixture()

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
      const url = template.replace('BRIDGE', new URL(upstash.bridge.url).host)
      const token = template.includes('BRIDGE') ? upstash.bridge.token : 't'
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
        // Whether serve decides through the store, not how fast: with the default 45 ms deadline the
        // first call (connection and script load) on a loaded machine fell back to a denial.
        timeout: '5s',
      })
      expect((await limiter.limit(`check-${template}`)).allowed).toBe(true)
    } finally {
      await handle.close()
    }
  })

  test('Cluster nodes: ports 1 to 65535, IPv6 in brackets; a refusal names its problem', () => {
    const nodes = [
      '10.0.0.1:6379',
      '[::1]:7000',
      'redis://[::1]:7001',
      'c:0',
      'c:65536',
      'c:07000',
      '::1:7000',
      'c',
      '[::zz]:7000',
      'redis://c:70000',
      'redis://c:0',
    ]
    const text = `store: { type: redis-cluster, nodes: ${JSON.stringify(nodes)} }\nrules: []\n`
    const { issues } = checkSource(parsePolicyText(text, 'c.yaml', {}))
    const form = 'expected host:port (like "10.0.0.1:7000", or "[::1]:7000" for IPv6) or a redis:// URL'
    expect(issues.map((i) => `${i.path.at(-1)} ${i.code} ${i.message}`)).toEqual([
      '3 ERR_URL expected a port from 1 to 65535, got "c:0" (string)',
      '4 ERR_URL expected a port from 1 to 65535, got "c:65536" (string)',
      '5 ERR_URL expected a port from 1 to 65535, got "c:07000" (string)',
      `6 ERR_URL ${form}, got "::1:7000" (string)`,
      `7 ERR_URL ${form}, got "c" (string)`,
      '8 ERR_URL expected an IPv6 address in the brackets, got "[::zz]:7000" (string)',
      '9 ERR_URL expected a port from 1 to 65535, got "redis://c:70000" (string)',
      '10 ERR_URL expected a port from 1 to 65535, got "redis://c:0" (string)',
    ])
    // A Redis URL's port as well, with its password hidden.
    const store = checkSource(
      parsePolicyText('store: "redis://:pw@localhost:99999"\nrules: []\n', 's.yaml', {}),
    )
    expect(store.issues.map((i) => i.message)).toEqual([
      'expected a port from 1 to 65535, got "redis://***@localhost:99999" (string)',
    ])
    // A password without a port is not a port: a managed Redis's connection string as given.
    for (const url of [
      'redis://:pw@10.0.0.5',
      'redis://user:pw@10.0.0.5',
      'rediss://default:tok@my.host/2',
      'redis://u:p:w@h@host:6379/1',
      'redis://:pw@[::1]',
    ]) {
      const ok = checkSource(parsePolicyText(`store: "${url}"\nrules: []\n`, 's.yaml', {}))
      expect(ok.issues, url).toEqual([])
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

describe('the JSON Schema and `check` agree', () => {
  const schema = JSON.parse(readFileSync(join(GATEWAY_ROOT, 'schema/edgelimit.schema.json'), 'utf8'))
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema)
  const rule = (body: string, top = '') =>
    `version: 1\n${top}rules:\n  - name: r\n${body
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n')}\n`
  const fw = 'algorithm: fixed-window\nlimit: 5\nwindow: 1m'
  const top = (body: string) => `version: 1\n${body}\nrules: []\n`
  const tiers = (plans: string, extra = '  header: x-plan\n') =>
    rule(`algorithm: fixed-window\nwindow: 1m\ntiers:\n${extra}  default: a\n  plans:\n${plans}`)
  const cases: Record<string, string> = {
    dur_decimal: rule('algorithm: fixed-window\nlimit: 5\nwindow: 1.5s'),
    dur_0: rule('algorithm: fixed-window\nlimit: 5\nwindow: 0s'),
    dur_0ms: rule('algorithm: fixed-window\nlimit: 5\nwindow: 0.0ms'),
    dur_fraction_of_ms: rule('algorithm: fixed-window\nlimit: 5\nwindow: 1.5ms'),
    dur_whole_ms: rule('algorithm: fixed-window\nlimit: 5\nwindow: 1.0ms'),
    dur_half_second: rule('algorithm: fixed-window\nlimit: 5\nwindow: 0.5s'),
    dur_fraction_of_ms_in_s: rule('algorithm: fixed-window\nlimit: 5\nwindow: 0.0005s'),
    dur_ms_over_a_year: rule('algorithm: fixed-window\nlimit: 5\nwindow: 31622400001'),
    dur_space: rule('algorithm: fixed-window\nlimit: 5\nwindow: "60 s"'),
    dur_upper: rule('algorithm: fixed-window\nlimit: 5\nwindow: 60S'),
    dur_float: rule('algorithm: fixed-window\nlimit: 5\nwindow: 1000.5'),
    limit_str: rule('algorithm: fixed-window\nlimit: "5"\nwindow: 1m'),
    gcra_no_burst: rule('algorithm: gcra\nlimit: 5\nperiod: 1s'),
    gcra_no_period: rule('algorithm: gcra\nlimit: 5'),
    tb_missing_refill: rule('algorithm: token-bucket\ncapacity: 5'),
    tb_full: rule('algorithm: token-bucket\ncapacity: 5\nrefillRate: 1'),
    lb_missing_leak: rule('algorithm: leaky-bucket\ncapacity: 5'),
    fw_missing_limit: rule('algorithm: fixed-window\nwindow: 1m'),
    sw_missing_window: rule('algorithm: sliding-window\nlimit: 5'),
    tiers_give_limit: tiers('    a: { limit: 1 }\n    b: { limit: 2 }'),
    tiers_one_without_limit: tiers('    a: { limit: 1 }\n    b: {}'),
    tiers_without_header_or_keys: tiers('    a: { limit: 1 }', ''),
    tiers_by_keys: tiers('    a: { limit: 1 }', '  keys: { k: a }\n'),
    tiers_plan_wrong_param: tiers('    a: { limit: 1, capacity: 2 }'),
    tiers_plan_name_bad: tiers('    "a b": { limit: 1 }').replace('default: a', 'default: "a b"'),
    tiers_header_bad: tiers('    a: { limit: 1 }', '  header: "x plan"\n'),
    // A plan reference that no plan name could be: the schema knows the names' form.
    tiers_default_no_name: tiers('    a: { limit: 1 }').replace('default: a', 'default: "a b"'),
    tiers_default_empty: tiers('    a: { limit: 1 }').replace('default: a', 'default: ""'),
    tiers_key_no_name: tiers('    a: { limit: 1 }', '  keys: { k: "-a" }\n'),
    tiers_key_empty: tiers('    a: { limit: 1 }', '  keys: { k: "" }\n'),
    tiers_key_slash: tiers('    a: { limit: 1 }', '  keys: { k: a/b }\n'),
    tiers_default_env: tiers('    a: { limit: 1 }').replace('default: a', `default: "\${PLAN:-a}"`),
    tiers_key_env: tiers('    a: { limit: 1 }', `  keys: { k: "\${PLAN:-a}" }\n`),
    version2: 'version: 2\nrules: []\n',
    no_version: 'rules: []\n',
    headers_empty: top('headers: []'),
    headers_two_drafts: top('headers: [draft-10, draft-7]'),
    headers_draft_and_legacy: top('headers: [draft-6, legacy]'),
    headers_true: top('headers: true'),
    store_redis_bare: top('store: "redis://"'),
    store_http: top('store: "http://x"'),
    store_upstash_http: top('store: { type: upstash, url: "http://127.0.0.1:8079", token: t }'),
    store_upstash_short_host: top('store: { type: upstash, url: "https://x", token: t }'),
    store_upstash_upper_scheme: top('store: { type: upstash, url: "HTTPS://x.io", token: t }'),
    store_upstash_slash: top('store: { type: upstash, url: "https://x.io/", token: t }'),
    store_upstash_double_slash: top('store: { type: upstash, url: "https://x.io//", token: t }'),
    store_upstash_query: top('store: { type: upstash, url: "https://x.io/?a=b", token: t }'),
    store_upstash_not_url: top('store: { type: upstash, url: "notaurl", token: t }'),
    store_cluster_not_url: top('store: { type: redis-cluster, nodes: ["nohost"] }'),
    store_cluster_address: top('store: { type: redis-cluster, nodes: ["a:7000", "redis://b:7001"] }'),
    store_cluster_path: top('store: { type: redis-cluster, nodes: ["redis://b:7001/1"] }'),
    store_cluster_port_0: top('store: { type: redis-cluster, nodes: ["a:0"] }'),
    store_cluster_port_65535: top('store: { type: redis-cluster, nodes: ["a:65535"] }'),
    store_cluster_port_65536: top('store: { type: redis-cluster, nodes: ["a:65536"] }'),
    store_cluster_port_leading_0: top('store: { type: redis-cluster, nodes: ["a:07000"] }'),
    store_cluster_ipv6: top('store: { type: redis-cluster, nodes: ["[::1]:7000", "[2001:db8::5]:7001"] }'),
    store_cluster_ipv6_bare: top('store: { type: redis-cluster, nodes: ["::1:7000"] }'),
    store_memory_max0: top('store: { type: memory, maxKeys: 0 }'),
    store_prefix_empty: top('store: { type: redis, url: "redis://a", prefix: "" }'),
    store_prefix_braces: top('store: { type: redis, url: "redis://a", prefix: "a{b}" }'),
    upstream_ftp: top('upstream: "ftp://x"'),
    upstream_upper_scheme: top('upstream: "HTTP://x"'),
    upstream_conn0: top('upstream: { url: "http://x", connections: 0 }'),
    upstream_path: top('upstream: "http://x:3000/base/"'),
    upstream_at_in_path: top('upstream: "http://x/a@b"'),
    upstream_backslash_path: top('upstream: "http://x\\\\base"'),
    upstream_user: top('upstream: "http://u:pw@x/base"'),
    upstream_user_only: top('upstream: "http://u@x"'),
    upstream_empty_user: top('upstream: "http://@x"'),
    upstream_user_backslash: top('upstream: "http:\\\\u:pw@x"'),
    upstream_query: top('upstream: "http://x/base?q=1"'),
    upstream_empty_query: top('upstream: "http://x/?"'),
    upstream_fragment: top('upstream: "http://x#top"'),
    upstream_url_user: top('upstream: { url: "https://u:pw@x" }'),
    upstream_url_query: top('upstream: { url: "https://x?q=1" }'),
    clients_all: top(
      'clients: { headersTimeout: 5s, requestTimeout: 1m, keepAliveTimeout: 5s, maxBodySize: 1MB, websocketIdleTimeout: 10m }',
    ),
    clients_bytes: top('clients: { maxBodySize: 1048576 }'),
    clients_size_0: top('clients: { maxBodySize: 0 }'),
    clients_size_0kb: top('clients: { maxBodySize: 0kb }'),
    clients_size_no_unit: top('clients: { maxBodySize: "1024" }'),
    clients_size_space: top('clients: { maxBodySize: "10 mb" }'),
    clients_size_decimal: top('clients: { maxBodySize: 1.5mb }'),
    clients_size_tb: top('clients: { maxBodySize: 1tb }'),
    clients_duration_bad: top('clients: { keepAliveTimeout: soon }'),
    clients_ws_idle_0: top('clients: { websocketIdleTimeout: 0s }'),
    clients_ws_idle_ms: top('clients: { websocketIdleTimeout: 90000 }'),
    clients_unknown: top('clients: { bodyTimeout: 5s }'),
    clients_not_object: top('clients: 5s'),
    env_in_size: top(`clients: { maxBodySize: "\${S:-10mb}" }`),
    cidr_v4: top('identity: { trustedProxies: [10.0.0.0/8, 192.0.2.1, 0.0.0.0/0] }'),
    cidr_v6: top('identity: { trustedProxies: ["2001:db8::/32", "::1", "::/0", "::ffff:10.0.0.0/104"] }'),
    cidr_v6_embedded_v4: top('identity: { trustedProxies: ["64:ff9b::192.0.2.1/96"] }'),
    cidr_padded: top('identity: { trustedProxies: [" 10.0.0.0/8 "] }'),
    cidr_one: top('identity: { trustedProxies: 10.0.0.0/8 }'),
    cidr_one_bad: top('identity: { trustedProxies: 10.0.0.0/33 }'),
    cidr_one_env: top(`identity: { trustedProxies: "\${P:-10.0.0.0/8}" }`),
    cidr_octet_out_of_range: top('identity: { trustedProxies: [300.0.0.1/8] }'),
    cidr_leading_zero: top('identity: { trustedProxies: [010.0.0.1] }'),
    cidr_prefix_leading_zero: top('identity: { trustedProxies: [10.0.0.0/08] }'),
    cidr_v4_prefix_33: top('identity: { trustedProxies: [10.0.0.0/33] }'),
    cidr_v6_prefix_129: top('identity: { trustedProxies: ["2001:db8::/129"] }'),
    cidr_v6_two_gaps: top('identity: { trustedProxies: ["2001::db8::1"] }'),
    cidr_v6_triple_colon: top('identity: { trustedProxies: ["2001:db8:::/32"] }'),
    cidr_v6_nine_groups: top('identity: { trustedProxies: ["1:2:3:4:5:6:7:8:9"] }'),
    cidr_v6_zone: top('identity: { trustedProxies: ["fe80::1%eth0"] }'),
    cidr_v6_brackets: top('identity: { trustedProxies: ["[::1]"] }'),
    cidr_host_name: top('identity: { trustedProxies: [proxy.internal] }'),
    cidr_empty: top('identity: { trustedProxies: [""] }'),
    cidr_env: top(`identity: { trustedProxies: ["\${PROXIES:-10.0.0.0/8}"] }`),
    trusted_neg: top('identity: { trustedProxies: -1 }'),
    trusted_65_hops: top('identity: { trustedProxies: 65 }'),
    identity_header_bad: top('identity: { header: "bad header" }'),
    secret_empty: top('identity: { secret: "" }'),
    admin_token_empty: top('admin: { token: "" }'),
    name_long: rule(fw).replace('name: r', `name: ${'a'.repeat(49)}`),
    name_dash_first: rule(fw).replace('name: r', 'name: -a'),
    path_no_slash: rule(`${fw}\nmatch: { path: api }`),
    path_empty_list: rule(`${fw}\nmatch: { path: [] }`),
    host_empty: rule(`${fw}\nmatch: { host: "" }`),
    host_empty_list: rule(`${fw}\nmatch: { host: [] }`),
    methods_lower: rule(`${fw}\nmatch: { methods: [get] }`),
    methods_bad: rule(`${fw}\nmatch: { methods: ["GE T"] }`),
    methods_empty_list: rule(`${fw}\nmatch: { methods: [] }`),
    match_header_name_bad: rule(`${fw}\nmatch: { headers: { "bad name": true } }`),
    key_empty_list: rule(`${fw}\nkey: []`),
    key_header_empty: rule(`${fw}\nkey: "header:"`),
    key_upper: rule(`${fw}\nkey: IP`),
    cost_neg: rule(`${fw}\ncost: -1`),
    cost_unsafe: rule(`${fw}\ncost: 9007199254740992`),
    limit_2_31: rule('algorithm: fixed-window\nlimit: 2147483648\nwindow: 1m'),
    limit_2_31_minus_1: rule('algorithm: fixed-window\nlimit: 2147483647\nwindow: 1ms'),
    burst_2_31: rule('algorithm: gcra\nlimit: 5\nperiod: 1s\nburst: 2147483648'),
    tb_capacity_0: rule('algorithm: token-bucket\ncapacity: 0\nrefillRate: 1'),
    tb_plan_capacity_0: rule(
      'algorithm: token-bucket\nrefillRate: 1\ntiers: { header: x, default: a, plans: { a: { capacity: 0 } } }',
    ),
    lb_shape_capacity_0: rule('algorithm: leaky-bucket\ncapacity: 0\nleakRate: 1\nshape: true'),
    key_padded: rule(`${fw}\nkey: [" ip", "header:x-api-key "]`),
    key_query_blank: rule(`${fw}\nkey: "query: "`),
    fallback_empty: top('identity: { fallback: "" }'),
    store_cluster_one_node: top('store: { type: redis-cluster, nodes: "redis://a:7000" }'),
    store_prefix_env: top(`store: { type: redis, url: "redis://a", prefix: "\${PREFIX:-gw}" }`),
    clients_timeout_24d: top('clients: { keepAliveTimeout: 2073600000 }'),
    clients_timeout_past_24d: top('clients: { keepAliveTimeout: 2073600001 }'),
    enforce_str: rule(`${fw}\nenforce: "50%"`),
    timeout_true: rule(`${fw}\ntimeout: true`),
    // Node never passes a `__proto__` header on (req.headers has no such own field), in any case.
    key_header_proto: rule(`${fw}\nkey: "header:__proto__"`),
    key_header_proto_upper: rule(`${fw}\nkey: [ip, "header:__Proto__"]`),
    key_header_constructor: rule(`${fw}\nkey: "header:constructor"`),
    key_query_proto: rule(`${fw}\nkey: "query:__proto__"`),
    tiers_header_proto: tiers('    a: { limit: 1 }', '  header: __proto__\n'),
    match_header_proto: rule(`${fw}\nmatch: { headers: { __PROTO__: "x" } }`),
    identity_header_proto: top('identity: { header: __proto__ }'),
    env_in_limit: rule(`algorithm: fixed-window\nlimit: \${L:-5}\nwindow: 1m`),
    env_in_part_of_duration: rule(`algorithm: fixed-window\nlimit: 5\nwindow: \${W:-1}m`),
    env_in_name: rule(fw).replace('name: r', `name: \${N:-abc}`),
    env_in_algorithm: rule(`algorithm: \${A:-gcra}\nlimit: 5\nperiod: 1s`),
    env_in_enforce: rule(`${fw}\nenforce: \${E:-50}`),
    env_in_mode: rule(`${fw}\nmode: \${M:-shadow}`),
    env_in_key: rule(`${fw}\nkey: \${K:-ip}`),
    env_in_key_part: rule(`${fw}\nkey: [ip, "header:\${H:-x-api-key}"]`),
    env_in_on_store_error: rule(`${fw}\nonStoreError: \${O:-open}`),
    env_in_consistency: rule(`${fw}\nconsistency: \${C:-local}`),
    env_in_path: rule(`${fw}\nmatch: { path: "\${P:-/api}/**" }`),
    env_in_methods: rule(`${fw}\nmatch:\n  methods:\n    - \${M:-GET}`),
    env_in_shape: rule(`algorithm: leaky-bucket\ncapacity: 3\nleakRate: 1\nshape: \${S:-true}`),
    env_in_timeout: rule(`${fw}\ntimeout: \${T:-false}`),
    env_in_store_url: top(`store: { type: redis, url: "\${R:-redis://a}" }`),
    env_in_upstream: top(`upstream: "\${U:-http://x}"`),
    env_in_connections: top(`upstream:\n  url: "http://x"\n  connections: \${C:-4}`),
    env_in_preserve_host: top(`upstream:\n  url: "http://x"\n  preserveHost: \${P:-true}`),
    env_in_trusted: top(`identity:\n  trustedProxies: \${T:-1}`),
    env_in_headers: top(`headers: \${H:-draft-7}`),
    env_in_header_list: top(`headers: [legacy, "\${H:-draft-7}"]`),
    // The schema sees no quotes: a quoted placeholder must mean what an unquoted one does.
    env_quoted_in_connections: top(`upstream: { url: "http://x", connections: "\${C:-4}" }`),
    env_quoted_in_preserve_host: top(`upstream: { url: "http://x", preserveHost: "\${P:-true}" }`),
    env_quoted_in_plan: tiers(`    a: { limit: "\${L:-1}" }`),
    env_quoted_in_shape: rule(`algorithm: leaky-bucket\ncapacity: 0\nleakRate: 1\nshape: "\${S:-true}"`),
    env_quoted_in_timeout: rule(`${fw}\ntimeout: "\${T:-false}"`),
    timeout_24d_ms: rule(`${fw}\ntimeout: 2073600000`),
    timeout_past_24d_ms: rule(`${fw}\ntimeout: 2073600001`),
    upstash_timeout_past_24d_ms: top(
      'store: { type: upstash, url: "https://x.upstash.io", token: t, timeout: 2147483648 }',
    ),
    upstream_timeout_24d_ms: top('upstream: { url: "http://x", timeout: 2073600000 }'),
    upstream_timeout_past_24d_ms: top('upstream: { url: "http://x", timeout: 2073600001 }'),
    upstream_connect_timeout_past_24d_ms: top('upstream: { url: "http://x", connectTimeout: 2147483648 }'),
    upstream_body_timeout_past_24d_ms: top('upstream: { url: "http://x", bodyTimeout: 2147483648 }'),
    env_quoted_in_hops: top(`identity: { trustedProxies: "\${T:-2}" }`),
    env_quoted_in_headers: top(`headers: "\${H:-false}"`),
  }

  test.each(Object.entries(cases))('%s', (name, text) => {
    const schemaSays = validate(parse(text)) ? 'accepts' : 'refuses'
    const { issues } = checkSource(parsePolicyText(text, `${name}.yaml`, {}))
    const checkSays = issues.length === 0 ? 'accepts' : 'refuses'
    expect(
      { schema: schemaSays, errors: schemaSays === checkSays ? [] : validate.errors },
      issues.map((i) => `${i.code} ${i.message}`).join('\n'),
    ).toEqual({ schema: checkSays, errors: [] })
  })

  // What JSON Schema cannot say: that a name refers to a plan the same file defines (it does say
  // that the name has a plan name's form).
  test.each([
    [
      'a tier default that is no plan',
      tiers('    a: { limit: 1 }').replace('default: a', 'default: b'),
      'ERR_TIER',
    ],
    ['a tier key mapped to no plan', tiers('    a: { limit: 1 }', '  keys: { k: b }\n'), 'ERR_TIER'],
    // Nor how two fields compare, or a duration's unit-dependent bound.
    [
      'a headersTimeout longer than requestTimeout',
      top('clients: { headersTimeout: 2m, requestTimeout: 1m }'),
      'ERR_RANGE',
    ],
    ['a keep-alive timeout past Node’s timer limit', top('clients: { keepAliveTimeout: 25d }'), 'ERR_RANGE'],
    // An Upstash timeout of more than 2^31 - 1 ms: its AbortSignal fires at once. (A rule's store
    // deadline may be longer: the library times such a wait in steps.)
    [
      'an Upstash timeout past Node’s timer limit',
      top('store: { type: upstash, url: "https://x.upstash.io", token: t, timeout: 25d }'),
      'ERR_RANGE',
    ],
    [
      'a WebSocket idle timeout past Node’s timer limit',
      top('clients: { websocketIdleTimeout: 25d }'),
      'ERR_RANGE',
    ],
    // An upstream timeout of more than 2^31 - 1 ms: the timer of a request waiting for a free
    // connection (or of a WebSocket handshake, or of a client that reads nothing) fires at once.
    [
      'an upstream timeout past Node’s timer limit',
      top('upstream: { url: "http://x", timeout: 25d }'),
      'ERR_RANGE',
    ],
    [
      'an upstream connect timeout past Node’s timer limit',
      top('upstream: { url: "http://x", connectTimeout: 25d }'),
      'ERR_RANGE',
    ],
    [
      'an upstream body timeout past Node’s timer limit',
      top('upstream: { url: "http://x", bodyTimeout: 25d }'),
      'ERR_RANGE',
    ],
    // Nor what a rule's parameters admit against its cost.
    [
      'a cost above what the rule can ever admit',
      rule('algorithm: fixed-window\nlimit: 3\nwindow: 1m\ncost: 4'),
      'ERR_COST_NEVER_ADMITTED',
    ],
    // Nor a syncInterval on a rule that is not approximate, which defaults can make it.
    ['a syncInterval on a strict rule', rule(`${fw}\nsyncInterval: 1s`), 'ERR_SYNC_INTERVAL'],
    // Nor a size's bound, which depends on its unit.
    ['a body size past 2^53 - 1 bytes', top('clients: { maxBodySize: 8388608gb }'), 'ERR_RANGE'],
    ['a body size of too many digits', top('clients: { maxBodySize: 99999999999999999999b }'), 'ERR_RANGE'],
  ])('beyond the schema, check alone refuses %s', (_, text, code) => {
    expect(validate(parse(text))).toBe(true)
    expect(checkSource(parsePolicyText(text, 'beyond.yaml', {})).issues).toEqual([
      expect.objectContaining({ code }),
    ])
  })

  test.each([
    ['a rule', rule(`${fw}\ntimeout: 30d`)],
    ['defaults', top('defaults: { timeout: 600h }')],
  ])('a store deadline beyond 24 days (%s) is taken: the library times such a wait in steps', (_, text) => {
    expect(validate(parse(text))).toBe(true)
    expect(checkSource(parsePolicyText(text, 'long.yaml', {})).issues).toEqual([])
  })

  test('a header no request has is refused where it is read, with why', () => {
    const text = `version: 1
identity: { header: __proto__ }
rules:
  - name: r
    match: { headers: { __proto__: false } }
    key: [ip, "header:__PROTO__"]
    algorithm: fixed-window
    window: 1m
    tiers: { header: __proto__, default: a, plans: { a: { limit: 1 } } }
`
    const { issues } = checkSource(parsePolicyText(text, 'proto.yaml', {}))
    const why = 'Node never passes a "__proto__" header on: a request never has it'
    expect(issues.map((i) => [i.path.join('.'), i.code, i.message])).toEqual([
      ['identity.header', 'ERR_HEADER', `expected a header name a request can have; ${why}`],
      ['rules.0.match.headers.__proto__', 'ERR_HEADER', `expected a header name a request can have; ${why}`],
      [
        'rules.0.key.1',
        'ERR_KEY',
        `expected a header name a request can have; ${why}, and the key would always fall back to the address`,
      ],
      ['rules.0.tiers.header', 'ERR_HEADER', `expected a header name a request can have; ${why}`],
    ])
  })

  test('a trusted proxy: the schema takes exactly the addresses and networks check takes', () => {
    const octet = fc.oneof(
      { arbitrary: fc.nat(255).map(String), weight: 8 },
      fc.nat(300).map(String),
      fc.constantFrom('010', '00', '', '1e1'),
    )
    const hex = (minLength: number, maxLength: number) =>
      fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF'), minLength, maxLength })
    const group = fc.oneof({ arbitrary: hex(1, 4), weight: 8 }, hex(0, 5), fc.constantFrom('ffff', 'FFFF'))
    const v4 = fc.array(octet, { minLength: 3, maxLength: 5 }).map((o) => o.join('.'))
    const v6 = fc
      .tuple(fc.array(group, { maxLength: 9 }), fc.nat(10), fc.boolean(), fc.option(v4))
      .map(([groups, at, gap, tail]) => {
        const parts = [...groups]
        if (gap) parts.splice(Math.min(at, parts.length), 0, '')
        return [...parts, ...(tail === null ? [] : [tail])].join(':')
      })
    const prefix = fc.oneof(
      fc.constant(''),
      fc.nat(140).map((n) => `/${n}`),
      fc.constantFrom('/', '/08', '/1/2'),
    )
    const entry = fc.oneof(
      fc
        .tuple(fc.oneof(v4, v6), prefix, fc.constantFrom('', ' ', '%eth0'))
        .map(([a, p, s]) => `${a}${p}${s}`),
      fc.string({ maxLength: 12 }),
    )
    fc.assert(
      // A ${VAR} is checked once substituted: the schema takes any.
      fc.property(
        entry.filter((a) => !a.includes('${')),
        (address) => {
          const policy = { rules: [], identity: { trustedProxies: [address] } }
          expect(validate(policy), address).toBe(validatePolicy(policy).issues.length === 0)
        },
      ),
      { numRuns: 20_000 },
    )
  })

  test('an empty list of paths, hosts or methods is refused: it would match every request', () => {
    const { issues } = checkSource(
      parsePolicyText(rule(`${fw}\nmatch: { path: [], host: [], methods: [] }`), 'empty.yaml', {}),
    )
    expect(issues.map((i) => `${i.path.join('.')} ${i.code} ${i.message}`)).toEqual([
      'rules.0.match.host ERR_HOST expected at least one host name or glob like "api.example.com" or "*.example.com", got []',
      'rules.0.match.path ERR_PATH expected at least one path or glob starting with "/", like "/api/**", got []',
      'rules.0.match.methods ERR_METHOD expected at least one HTTP method like "GET", got []',
    ])
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

  test('check - reads the policy from standard input, as the other commands read -', async () => {
    const good = await runCli(['check', '-'], {
      stdin: 'rules: [{ name: all, algorithm: fixed-window, limit: 10, window: 1m }]\n',
    })
    expect(good).toMatchObject({ code: 0, stdout: '✔ <stdin>: 1 rule, memory store\n' })
    const bad = await runCli(['check', '-c', '-'], {
      stdin: 'rules: [{ name: all, algorithm: fixed-window, limit: 10, window: soon }]\n',
    })
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/^<stdin>:1:\d+ {2}rules\[0\]\.window: expected a duration/)
    const twice = await runCli(['check', '-', '-'], { stdin: '' })
    expect(twice.code).toBe(2)
    expect(twice.stderr).toBe('edgelimit check: - (standard input) named twice: it can be read once\n')
  })

  test('check takes -c/--config as serve, simulate, replay and bench do, and edgelimit.yaml without a file', async () => {
    const flagged = await runCli(['check', '-c', 'examples/edgelimit.yaml'])
    expect(flagged.code).toBe(0)
    expect(flagged.stdout).toBe('✔ examples/edgelimit.yaml: 5 rules (1 tiered), memory store\n')
    const both = await runCli([
      'check',
      '--config',
      'examples/edgelimit.yaml',
      'packages/gateway/test/fixtures/bad/err-duration.yaml',
    ])
    expect(both.code).toBe(1)
    expect(both.stderr).toContain('✔ examples/edgelimit.yaml: 5 rules')
    expect(both.stderr).toContain('✖ packages/gateway/test/fixtures/bad/err-duration.yaml: 1 problem')
    // No file named: edgelimit.yaml in the working directory, as the other commands read it.
    const dir = tempDir()
    writePolicy(dir, 'rules: [{ name: all, algorithm: fixed-window, limit: 10, window: 1m }]\n')
    const byDefault = await runCli(['check'], { cwd: dir })
    expect(byDefault).toMatchObject({ code: 0, stdout: '✔ edgelimit.yaml: 1 rule, memory store\n' })
    const none = await runCli(['check'], { cwd: tempDir() })
    expect(none.code).toBe(2)
    expect(none.stderr).toBe(
      'edgelimit check: no policy named and no edgelimit.yaml here: name one (edgelimit check <file>... or -c <file>)\n',
    )
  })

  test('an unknown flag or a bad flag value is a usage error: exit 2 with a message', async () => {
    for (const [args, message] of [
      [['check', '--bogus', 'examples/edgelimit.yaml'], "edgelimit check: Unknown option '--bogus'"],
      [['serve', '--bogus'], "edgelimit serve: Unknown option '--bogus'"],
      [
        ['serve', '--port', 'eighty'],
        'edgelimit serve: --port: expected a port from 0 to 65535, got "eighty"',
      ],
      // Number() reads '' as 0 (`--port "$PORT"` with PORT unset: a random port, silently), and
      // takes 1e3, 0x1F90 and ' 80'; a port is written in digits.
      ...['', '1e3', '0x1F90', ' 80', '80.0'].map((typed) => [
        ['serve', `--port=${typed}`],
        `edgelimit serve: --port: expected a port from 0 to 65535, got "${typed}"`,
      ]),
      [['serve', '--admin-port='], 'edgelimit serve: --admin-port: expected a port from 0 to 65535, got ""'],
      [['serve', '--drain-timeout', 'soon'], 'edgelimit serve: --drain-timeout: expected a duration'],
      [
        ['serve', '--log-level', 'loud'],
        'edgelimit serve: --log-level: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"',
      ],
      [
        ['serve', '--upstream', 'foo'],
        'edgelimit serve: --upstream: expected a URL starting with http:// or https://, got "foo"',
      ],
      [
        ['serve', '--upstream', 'ftp://example.com'],
        'edgelimit serve: --upstream: expected a URL starting with http:// or https://, got "ftp://example.com"',
      ],
      [
        ['serve', '--upstream', 'ftp://user:s3cr3t@example.com'],
        'edgelimit serve: --upstream: expected a URL starting with http:// or https://, got "ftp://***@example.com"',
      ],
      [
        ['serve', '--upstream', 'http://user:s3cr3t@example.com'],
        'edgelimit serve: --upstream: expected an upstream URL without a user or password, got "http://***@example.com" (string): the gateway sends no credentials of its own',
      ],
      [
        ['serve', '--upstream', 'http://example.com/base?key=s3cr3t'],
        'edgelimit serve: --upstream: expected an upstream URL without a query or fragment, got "http://example.com/base?***" (string)',
      ],
    ]) {
      const result = await runCli(args as string[], { timeoutMs: 10_000 })
      expect(result.code, result.stderr).toBe(2)
      expect(result.stderr).toContain(message)
      expect(result.stderr + result.stdout).not.toContain('s3cr3t')
    }
  })

  test('a closed standard output ends a command quietly with its own exit code; one that fails to write is exit 2 with one line', async () => {
    const log = join(tempDir(), 'one.log')
    writeFileSync(log, '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2\n')
    for (const args of [
      ['simulate', '--list'],
      ['check', 'examples/edgelimit.yaml'],
    ]) {
      const closed = await runCli(args, { stdout: 'closed', timeoutMs: 10_000 })
      expect([closed.code, closed.stderr]).toEqual([0, ''])
    }
    // `replay --fail-on-block | head`: the block still fails the step.
    const twice = join(tempDir(), 'two.log')
    writeFileSync(twice, readFileSync(log, 'utf8').repeat(2))
    const blocked = await runCli(
      ['replay', twice, '--limit', '1', '--window', '1m', '--no-html', '--no-progress', '--fail-on-block'],
      { stdout: 'closed', timeoutMs: 10_000 },
    )
    expect(blocked.code, blocked.stderr).toBe(1)
    expect(blocked.stderr).not.toMatch(/cannot write| {4}at /)
    const full = openSync('/dev/full', 'w')
    try {
      for (const args of [
        ['check', 'examples/edgelimit.yaml'],
        ['replay', log, '--no-html', '--no-progress'],
        ['simulate', '--list'],
      ]) {
        const r = await runCli(args, { stdout: full, timeoutMs: 10_000 })
        expect(r.code, r.stderr).toBe(2)
        expect(r.stderr).toMatch(
          new RegExp(`^edgelimit ${args[0]}: cannot write to standard output: ENOSPC`, 'm'),
        )
        expect(r.stderr).not.toMatch(/ {4}at /)
      }
    } finally {
      closeSync(full)
    }
  })

  test('every command takes -h and --help: its usage on standard output, exit 0', async () => {
    for (const command of ['serve', 'check', 'simulate', 'replay', 'bench'])
      for (const flag of ['--help', '-h']) {
        const r = await runCli([command, flag], { timeoutMs: 10_000 })
        expect([r.code, r.stderr], `${command} ${flag}`).toEqual([0, ''])
        expect(r.stdout).toMatch(new RegExp(`^Usage: edgelimit ${command} `))
      }
  })

  test('a standard error that is closed or cannot be written changes no exit code (`2>&1 | head`)', async () => {
    const log = join(tempDir(), 'one.log')
    writeFileSync(log, '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2\n')
    const full = openSync('/dev/full', 'w')
    try {
      for (const stderr of ['closed', full] as const) {
        // Its progress goes to standard error.
        const replay = await runCli(['replay', log, '--limit', '5', '--window', '1m', '--no-html'], {
          stdout: 'closed',
          stderr,
          timeoutMs: 10_000,
        })
        expect(replay.code).toBe(0)
        // A usage error is still exit 2, its message lost with standard error.
        const usage = await runCli(['simulate', '--no-such-flag'], {
          stdout: 'closed',
          stderr,
          timeoutMs: 10_000,
        })
        expect(usage.code).toBe(2)
        const invalid = await runCli(['check', 'packages/gateway/test/fixtures/bad/err-param.yaml'], {
          stderr,
          timeoutMs: 10_000,
        })
        expect(invalid.code).toBe(1)
      }
    } finally {
      closeSync(full)
    }
  })

  test('`edgelimit --version` (and `version`, `-V`) prints the package version, exit 0', async () => {
    const { version } = JSON.parse(readFileSync(join(GATEWAY_ROOT, 'package.json'), 'utf8')) as {
      version: string
    }
    for (const flag of ['--version', 'version', '-V']) {
      const result = await runCli([flag], { timeoutMs: 10_000 })
      expect([result.code, result.stdout, result.stderr]).toEqual([
        0,
        `edgelimit ${version} (Node ${process.version})\n`,
        '',
      ])
    }
  })

  test('`edgelimit --help` names every flag serve takes (read off its options)', async () => {
    const source = readFileSync(join(GATEWAY_ROOT, 'src/serve.ts'), 'utf8')
    const flags = [
      ...source.matchAll(/^ {6}'?([\w-]+)'?: \{ type: '(?:string|boolean)'(?:, short: '(\w)')?/gm),
    ]
    expect(flags.map((m) => m[1])).toContain('quiet')
    const help = await runCli(['--help'], { timeoutMs: 10_000 })
    expect(help.code).toBe(0)
    const usage = help.stdout.slice(
      help.stdout.indexOf('edgelimit serve'),
      help.stdout.indexOf('edgelimit check'),
    )
    const named = (m: RegExpMatchArray) =>
      usage.includes(`[--${m[1]}`) ||
      usage.includes(`--${m[1]} `) ||
      (m[2] !== undefined && usage.includes(`[-${m[2]}]`))
    expect(flags.filter((m) => !named(m)).map((m) => m[1])).toEqual([])
  })

  test('a policy nested too deep (as written, or through aliases) is refused by every command with the issue: check and serve exit 1, the others 2', async () => {
    // Through a chain of aliases it was a RangeError: "edgelimit: Maximum call stack size exceeded".
    const dir = tempDir()
    const lines = [`x0: &a0 ${'['.repeat(60)}${']'.repeat(60)}`]
    for (let i = 1; i < 150; i++) lines.push(`x${i}: &a${i} ${'['.repeat(60)}*a${i - 1}${']'.repeat(60)}`)
    const chain = writePolicy(dir, `${lines.join('\n')}\nrules: [*a149]\n`, 'chain.yaml')
    const flow = writePolicy(dir, `rules: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`, 'flow.yaml')
    const log = join(dir, 'access.log')
    writeFileSync(log, '10.0.0.1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 5\n')
    const runs = [chain, flow].flatMap((policy) =>
      (
        [
          [['check', policy], 1],
          [['serve', '--config', policy, '--port', '0', '--admin-port', '0'], 1],
          [['simulate', '-c', policy, '--no-html'], 2],
          [['replay', '-c', policy, log, '--no-html'], 2],
          [['bench', '-c', policy], 2],
        ] as const
      ).map(async ([args, code]) => ({ args, code, result: await runCli(args) })),
    )
    for (const { args, code, result } of await Promise.all(runs)) {
      expect(result.code, args.join(' ')).toBe(code)
      expect(result.stderr, args.join(' ')).toMatch(
        /\.yaml:\d+:\d+ {2}\(root\): YAML: the policy nests lists and mappings deeper than 64 levels.*\[ERR_YAML\]/,
      )
      expect(result.stderr).not.toMatch(/call stack/)
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
