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
})
