import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const pkg = join(import.meta.dirname, '..', '..')

/** Runs a snippet in a fresh Node process against the built package, as a user would. */
function run(code: string, type: 'module' | 'commonjs'): string {
  const flag = type === 'module' ? '--input-type=module' : '--input-type=commonjs'
  return execFileSync(process.execPath, [flag, '-e', code], { cwd: pkg, encoding: 'utf8' }).trim()
}

describe('edgelimit/http entry', () => {
  it('exports the HTTP building blocks to ESM and CJS alike', () => {
    const esm = run(
      "console.log(JSON.stringify(Object.keys(await import('edgelimit/http')).sort()))",
      'module',
    )
    const cjs = run("console.log(JSON.stringify(Object.keys(require('edgelimit/http')).sort()))", 'commonjs')
    expect(JSON.parse(cjs)).toEqual(JSON.parse(esm))
    expect(JSON.parse(esm)).toMatchInlineSnapshot(`
      [
        "LOOPBACK",
        "PRIVATE",
        "PROBLEM_TYPES",
        "ceilSeconds",
        "clientKey",
        "createRateLimit",
        "hashKey",
        "inCidr",
        "isTrustedPeer",
        "normalizeIp",
        "parseCidr",
        "parseIp",
        "partitionKeyBytes",
        "pathGlob",
        "problemFor",
        "quotaPolicy",
        "rateLimitHeaders",
        "resolveClientIp",
        "routePath",
        "subnetKey",
        "subnetKeys",
        "validateClientKeyOptions",
      ]
    `)
  })

  it('keys a client through the built package: v4-mapped and plain IPv4 share a key, a forged header does not count', () => {
    const code = `
      const h = await import('edgelimit/http')
      const none = { header: () => null }
      const forged = { header: (n) => (n === 'x-forwarded-for' ? '198.51.100.9' : null) }
      const options = { trustedProxies: h.LOOPBACK, secret: 's3cret' }
      const a = await h.clientKey({ ...none, peer: '::ffff:203.0.113.5' }, options)
      const b = await h.clientKey({ ...none, peer: '203.0.113.5' }, options)
      const c = await h.clientKey({ ...forged, peer: '203.0.113.5' }, options)
      const d = await h.clientKey({ ...forged, peer: '127.0.0.1' }, options)
      const e = await h.clientKey({ ...none, peer: '198.51.100.9' }, options)
      console.log(JSON.stringify([a.key === b.key, a.key === c.key, d.key === e.key, a.key.length, a.key.includes('203')]))`
    expect(JSON.parse(run(code, 'module'))).toEqual([true, true, true, 43, false])
  })
})
