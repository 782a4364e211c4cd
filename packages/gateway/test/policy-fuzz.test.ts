// Bad input never crashes the gateway: random YAML text, and random edits of a policy that uses
// every field, either validate or come back as issues (never a throw); whatever validates compiles
// and decides random requests without throwing.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { parsePolicyText } from '../src/config/source.js'
import { checkSource, validatePolicy } from '../src/config/validate.js'
import { compilePolicy } from '../src/policy/compile.js'
import { decideSync } from '../src/policy/decide.js'
import { routeForm } from '../src/policy/path.js'
import type { RequestInfo } from '../src/policy/request.js'
import { openStore } from '../src/policy/store.js'
import { GATEWAY_ROOT } from './support/gateway.js'

const FULL = readFileSync(join(GATEWAY_ROOT, 'test/fixtures/good/full.yaml'), 'utf8')
// The full policy on the memory store (nothing to connect to), parsed once.
const BASE = (() => {
  const source = parsePolicyText(FULL, 'full.yaml', {})
  const value = structuredClone(source.value) as Record<string, unknown>
  value.store = { type: 'memory', maxKeys: 1000 }
  return value
})()

/** Every path into a JSON-like value (objects and arrays), the root included. */
function paths(value: unknown, at: (string | number)[] = []): (string | number)[][] {
  const out = [at]
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) out.push(...paths(v, [...at, i]))
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...at, k]))
  }
  return out
}
const PATHS = paths(BASE).filter((p) => p.length > 0)

/** Values a careless or hostile policy author writes. */
const odd = fc.oneof(
  fc.anything({ maxDepth: 2 }),
  fc.constantFrom(0, -1, 1e308, 2 ** 53 + 1, 0.5, Number.NaN, '', ' ', '0s', '-1s', '1e3ms', '999999999d'),
  fc.constantFrom('*', '**', '/**/*', '[', '(', '\\', 'header:', 'query:', 'ip,route', '::', '1.2.3.4/33'),
  fc.string({ maxLength: 12 }),
  fc.integer(),
  fc.double(),
)

type Edit = { path: number; action: 'set' | 'delete'; value: unknown }
const edit: fc.Arbitrary<Edit> = fc.record({
  path: fc.nat(PATHS.length - 1),
  action: fc.constantFrom('set', 'set', 'delete'),
  value: odd,
})

function applied(edits: readonly Edit[]): unknown {
  const doc = structuredClone(BASE) as Record<string | number, unknown>
  for (const e of edits) {
    const path = PATHS[e.path] as (string | number)[]
    let parent: unknown = doc
    for (const step of path.slice(0, -1)) {
      parent =
        parent !== null && typeof parent === 'object' ? (parent as Record<string, unknown>)[step] : undefined
    }
    if (parent === null || typeof parent !== 'object') continue
    const last = path[path.length - 1] as string | number
    if (e.action === 'delete') delete (parent as Record<string | number, unknown>)[last]
    else (parent as Record<string | number, unknown>)[last] = e.value
  }
  return doc
}

/** Pieces of YAML syntax, anchors, aliases and env references, to build texts that nearly parse. */
const YAML_TOKENS = fc.constantFrom(
  ...[': ', '- ', '[', ']', '{', '}', ', ', '#', '&a ', '*a', '!', '|', '>', "'", '"', '%', '@', '`'],
  ...['\n', '\n  ', '\t', ' ', 'rules', 'name', 'limit', 'window', '1m', '5', '$', '{X:-1}', '<<'],
  ...['__proto__', 'constructor'],
)

const request: fc.Arbitrary<RequestInfo> = fc
  .record({
    method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'get', ''),
    path: fc.oneof(fc.constantFrom('/', '/login', '/auth/x', '/api/a/b', '/export', '/search'), fc.string()),
    query: fc.oneof(fc.constant(''), fc.string()),
    host: fc.oneof(fc.constantFrom('', 'a.example.com', 'example.com:8080'), fc.string()),
    headers: fc.dictionary(
      fc.constantFrom('x-api-key', 'x-plan', 'x-tenant', 'x-forwarded-for', 'x-bot', 'accept'),
      fc.oneof(
        fc.string(),
        fc.constantFrom('key-123', 'pro', '10.0.0.1', '1.2.3.4, 10.0.0.1', '::1', 'false'),
      ),
    ),
    peer: fc.oneof(
      fc.constant(undefined),
      fc.constantFrom('10.0.0.1', '::ffff:10.1.2.3', '2001:db8::1', 'junk'),
      fc.string(),
    ),
  })
  .map(({ headers, ...r }) => ({
    ...r,
    routePath: routeForm(r.path),
    header: (name: string) => headers[name],
  }))

describe('policy fuzzing', () => {
  test('random YAML text gives a source with issues or a value, never a throw', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: YAML_TOKENS, maxLength: 60 })),
        (text) => {
          const { issues } = checkSource(parsePolicyText(text, 'fuzz.yaml', { X: 'y' }))
          for (const issue of issues) expect(issue.code).toMatch(/^ERR_[A-Z_]+$/)
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 2000) },
    )
  })

  test('an alias without its anchor, or an alias bomb, is a YAML issue placed in the file', () => {
    const unresolved = checkSource(parsePolicyText('version: 1\nrules: *none\n', 'a.yaml', {})).issues
    expect(unresolved).toMatchObject([{ code: 'ERR_YAML', file: 'a.yaml', line: 2, column: 8 }])
    expect(unresolved[0]?.message).toMatch(/alias/i)
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]',
      'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]',
      'rules: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]',
    ].join('\n')
    expect(checkSource(parsePolicyText(bomb, 'b.yaml', {})).issues).toMatchObject([
      { code: 'ERR_YAML', message: expect.stringMatching(/alias count/i) },
    ])
  })

  test('an alias inside the node it names (a cycle) is a YAML issue placed at the alias, not a stack overflow', () => {
    // The parser takes these, and toJS builds a value that contains itself: every walk of it recursed
    // for ever (check, serve, replay and simulate: "edgelimit: Maximum call stack size exceeded", exit 1).
    for (const [text, line, column] of [
      ['version: 1\nrules: &a [*a]\n', 2, 12],
      ['version: 1\nrules:\n  - &r { name: a, algorithm: gcra, limit: 1, period: 1s, match: *r }\n', 3, 65],
      ['version: 1\nidentity: &i\n  secret: s\n  x: [1, { y: *i }]\nrules: []\n', 4, 15],
    ] as const) {
      const { issues } = checkSource(parsePolicyText(text, 'cycle.yaml', {}))
      expect(issues).toMatchObject([{ code: 'ERR_YAML', file: 'cycle.yaml', line, column }])
      expect(issues[0]?.message).toMatch(/alias .* inside the node it refers to/)
    }
  })

  test('a policy nested deeper than 64 levels (flow, block, JSON) is a YAML issue at the 65th level, not a stack overflow', () => {
    // The YAML composer recursed once per level and ran out of stack past a few hundred: the issue
    // read "YAML syntax: Maximum call stack size exceeded", placed wherever the stack happened to end.
    const n = 10_000
    const block = Array.from({ length: 1000 }, (_, i) => `${' '.repeat(i + 1)}a:`).join('\n')
    for (const [text, line, column] of [
      [`rules: ${'['.repeat(n)}${']'.repeat(n)}\n`, 1, 8 + 63],
      [`rules: ${'{a: '.repeat(n)}1${'}'.repeat(n)}\n`, 1, 8 + 63 * 4],
      [`{"rules": ${'['.repeat(n)}${']'.repeat(n)}}`, 1, 11 + 63],
      [`rules:\n${'- '.repeat(n)}x\n`, 2, 1 + 63 * 2],
      [`rules:\n${block}\n`, 65, 65],
    ] as const) {
      const { issues } = checkSource(parsePolicyText(text, 'deep.yaml', {}))
      expect(issues, text.slice(0, 20)).toEqual([
        {
          path: [],
          code: 'ERR_YAML',
          message:
            'YAML: the policy nests lists and mappings deeper than 64 levels (a policy needs a handful)',
          file: 'deep.yaml',
          line,
          column,
        },
      ])
    }
    // 64 levels are read, and validated as any policy is.
    const levels64 = checkSource(
      parsePolicyText(`rules: ${'['.repeat(63)}${']'.repeat(63)}\n`, 'ok.yaml', {}),
    )
    expect(levels64.issues).toMatchObject([{ code: 'ERR_OBJECT', path: ['rules', 0] }])
  })

  test('aliases that nest the value deeper than 64 levels are a YAML issue at the alias, not a stack overflow', () => {
    // Each anchor 60 levels deep holds an alias to the one before: 150 of them nested the value
    // 9,000 levels, within the alias count; substituting ${ENV} then threw a RangeError out of
    // check, serve, replay and simulate ("edgelimit: Maximum call stack size exceeded", exit 1).
    const d = 60
    const lines = [`x0: &a0 ${'['.repeat(d)}${']'.repeat(d)}`]
    for (let i = 1; i < 150; i++) lines.push(`x${i}: &a${i} ${'['.repeat(d)}*a${i - 1}${']'.repeat(d)}`)
    lines.push('rules: [*a149]')
    const { issues } = checkSource(parsePolicyText(`${lines.join('\n')}\n`, 'chain.yaml', {}))
    expect(issues).toEqual([
      {
        path: [],
        code: 'ERR_YAML',
        message:
          'YAML: the policy nests lists and mappings deeper than 64 levels once the alias *a0 is expanded (a policy needs a handful)',
        file: 'chain.yaml',
        line: 2,
        column: 9 + d,
      },
    ])
  })

  test('a tag that builds no plain value (!!binary, !!set, !!timestamp, !!omap, a custom one) is a YAML issue at the tag', () => {
    // The parser turns these into a Uint8Array, a Set, a Date, a Map, or a string with a warning:
    // a binary was read as an object whose fields were its bytes, a set as empty defaults.
    for (const [text, tag, line, column] of [
      ['!!binary aGVsbG8=\n', '!!binary', 1, 1],
      ['rules: [ !!binary aGVsbG8= ]\n', '!!binary', 1, 10],
      ['rules: []\ndefaults: !!set { a, b }\n', '!!set', 2, 11],
      ['rules: []\nstore: !!timestamp 2001-12-14\n', '!!timestamp', 2, 8],
      ['rules: []\nidentity: !!omap [ { secret: s } ]\n', '!!omap', 2, 11],
      ['rules:\n  - name: !secret x\n    algorithm: gcra\n    limit: 1\n    period: 1s\n', '!secret', 2, 11],
    ] as const) {
      const { issues } = checkSource(parsePolicyText(text, 'tag.yaml', {}))
      expect(issues, text).toMatchObject([{ code: 'ERR_YAML', file: 'tag.yaml', line, column }])
      expect(issues[0]?.message).toBe(
        `YAML: the tag ${tag} is not part of a policy, which is plain YAML: mappings, lists, strings, numbers, booleans and null`,
      )
    }
    // The core schema's own tags build plain values: still taken.
    const core =
      'rules:\n  - name: !!str x\n    algorithm: gcra\n    limit: !!int "3"\n    period: 1s\n    match: !!map { path: /a }\n'
    expect(checkSource(parsePolicyText(core, 'core.yaml', {})).issues).toEqual([])
  })

  test('a core tag on a value it cannot read (!!bool yes, !!null x, !!map [1], !!int 5.0) is a YAML issue at the tag, not dropped', () => {
    // The parser only warns and reads the value as if untagged: `!!bool yes` was the header value
    // "yes" (not presence), `!!null x` the text "x", `!!map [a]` a list.
    const rule = (extra: string) =>
      `rules:\n  - name: r\n    algorithm: gcra\n    limit: 1\n    period: 1s\n${extra}`
    for (const [text, tag, line, column] of [
      [rule('    match: { headers: { x-debug: !!bool yes } }\n'), '!!bool', 6, 34],
      [`rules: []\nidentity: { secret: !!null x }\n`, '!!null', 2, 21],
      [rule('    key: !!map [ip]\n'), '!!map', 6, 10],
      [rule('    cost: !!int 5.0\n'), '!!int', 6, 11],
    ] as const) {
      const { config, issues } = checkSource(parsePolicyText(text, 'tag.yaml', {}))
      expect(config, text).toBeUndefined()
      expect(issues, text).toMatchObject([{ code: 'ERR_YAML', file: 'tag.yaml', line, column }])
      expect(issues[0]?.message).toBe(
        `YAML: the tag ${tag} cannot be read on this value (the parser would drop it): write the value without it`,
      )
    }
  })

  test('random edits of a full policy validate or report coded issues; what validates compiles and decides', async () => {
    const store = await openStore({ type: 'memory', maxKeys: 1000 })
    let valid = 0
    let invalid = 0
    fc.assert(
      fc.property(
        fc.array(edit, { minLength: 1, maxLength: 4 }),
        fc.array(request, { maxLength: 5 }),
        (edits, requests) => {
          const { config, issues } = validatePolicy(applied(edits))
          if (config === undefined) {
            invalid++
            expect(issues.length).toBeGreaterThan(0)
            for (const issue of issues) expect(issue.code).toMatch(/^ERR_[A-Z_]+$/)
            return
          }
          valid++
          const policy = compilePolicy(config, store)
          for (const r of requests) {
            const verdict = decideSync(policy, r, 1_000)
            expect(verdict.allowed || [429, 503].includes(verdict.denial?.status ?? 0)).toBe(true)
            for (const [name, value] of verdict.headers)
              expect(`${name}: ${value}`).toMatch(/^[\x21-\x7e]+: [\x20-\x7e]*$/)
          }
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 3000) },
    )
    // Both sides of the property were exercised.
    expect(valid).toBeGreaterThan(100)
    expect(invalid).toBeGreaterThan(100)
    await store.close()
  })
})
