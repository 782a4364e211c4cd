import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const pkg = join(import.meta.dirname, '..', '..')

/** Runs a snippet in a fresh Node process against the built package, as a user would. */
function run(code: string, type: 'module' | 'commonjs'): string {
  const flag = type === 'module' ? '--input-type=module' : '--input-type=commonjs'
  return execFileSync(process.execPath, [flag, '-e', code], { cwd: pkg, encoding: 'utf8' }).trim()
}

describe('built package', () => {
  it('exports the same names to ESM and CJS, snapshot-tested so API changes show in review', () => {
    const esm = run(
      "const m = await import('edgelimit'); const t = await import('edgelimit/testing'); console.log(JSON.stringify([Object.keys(m).sort(), Object.keys(t).sort()]))",
      'module',
    )
    const cjs = run(
      "const m = require('edgelimit'); const t = require('edgelimit/testing'); console.log(JSON.stringify([Object.keys(m).sort(), Object.keys(t).sort()]))",
      'commonjs',
    )
    expect(JSON.parse(cjs)).toEqual(JSON.parse(esm))
    expect(JSON.parse(esm)).toMatchInlineSnapshot(`
      [
        [
          "ConfigError",
          "EdgelimitError",
          "algorithmSpec",
          "approximate",
          "coarseClock",
          "createLimiter",
          "fixedWindow",
          "gcra",
          "leakyBucket",
          "memoryStore",
          "meterSink",
          "parseDuration",
          "remoteDecider",
          "slidingLog",
          "slidingWindow",
          "systemClock",
          "tokenBucket",
        ],
        [
          "manualClock",
          "storeConformance",
        ],
      ]
    `)
  })

  it('decides through the built ESM and CJS builds', () => {
    const code = (load: string) =>
      `${load}; const clock = t.manualClock(0); const l = m.createLimiter({ rules: [{ name: 'r', algorithm: m.tokenBucket({ capacity: 2, refillRate: 1 }) }], clock }); const a = [l.limitSync('k'), l.limitSync('k'), l.limitSync('k')].map((d) => d.allowed + ':' + d.retryAfterMs); console.log(a.join(','))`
    const expected = 'true:0,true:0,false:1000'
    expect(
      run(code("const m = await import('edgelimit'); const t = await import('edgelimit/testing')"), 'module'),
    ).toBe(expected)
    expect(
      run(code("const m = require('edgelimit'); const t = require('edgelimit/testing')"), 'commonjs'),
    ).toBe(expected)
  })

  it("one error class per module system: every entry point throws the root's classes, and the HTTP layer falls back from limitSync on an async store", () => {
    // Under require() each entry point once carried its own copy of the core: the HTTP layer did
    // not recognise the limiter's ERR_EDGELIMIT_SYNC_UNSUPPORTED, and rethrew it on every request.
    const code = (load: (entry: string) => string) => `
      const m = ${load('edgelimit')}, h = ${load('edgelimit/http')}, r = ${load('edgelimit/redis')}
      const thrown = (f) => { try { f() } catch (e) { return e } }
      const errors = [
        thrown(() => r.redisStore({})),
        thrown(() => h.createRateLimit({ limiter: 'nope' })),
        thrown(() => m.createLimiter({ rules: [] })),
      ].map((e) => [e instanceof m.ConfigError, e instanceof m.EdgelimitError])
      // An async store (a remote one's shape: no limitSync) behind the HTTP layer.
      const store = { name: 'async', decider: m.remoteDecider, bind(rules) {
        const b = m.memoryStore().bind(rules)
        return { evaluate: (k, c, n, o) => Promise.resolve(b.evaluateSync(k, c, n, o)), reset: (k) => b.reset(k) }
      } }
      // A clock that stands still: on the system clock, an hour's end between the two checks admitted both.
      const limiter = m.createLimiter({ rules: [{ name: 'api', algorithm: m.fixedWindow({ limit: 1, window: '1h' }) }], store, clock: { now: () => 0 } })
      const rl = h.createRateLimit({ limiter })
      const request = { method: 'GET', path: '/', peer: '203.0.113.5', header: () => null }
      const verdicts = []
      for (let i = 0; i < 2; i++) verdicts.push((await rl.check(request)).action)
      console.log(JSON.stringify({ errors, verdicts }))`
    const expected = {
      errors: [
        [true, true],
        [true, true],
        [true, true],
      ],
      verdicts: ['continue', 'respond'],
    }
    expect(
      JSON.parse(
        run(
          code((e) => `await import('${e}')`),
          'module',
        ),
      ),
    ).toEqual(expected)
    expect(JSON.parse(run(`(async () => { ${code((e) => `require('${e}')`)} })()`, 'commonjs'))).toEqual(
      expected,
    )
    // Both module systems in one app (the dual-package hazard): the ESM limiter behind the CJS
    // HTTP layer still falls back to limit(), since errors are told apart by code.
    const mixed = code((e) =>
      e === 'edgelimit/http' ? `createRequire(process.cwd() + '/')('${e}')` : `await import('${e}')`,
    )
    const both = JSON.parse(run(`import { createRequire } from 'node:module'\n${mixed}`, 'module'))
    expect(both.verdicts).toEqual(expected.verdicts)
  })
})
