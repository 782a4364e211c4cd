import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const pkg = join(import.meta.dirname, '..', '..')
const entries = ['fetch', 'node', 'express', 'fastify', 'hono']

function names(type: 'module' | 'commonjs'): Record<string, string[]> {
  const load =
    type === 'module'
      ? (e: string) => `await import('edgelimit/${e}')`
      : (e: string) => `require('edgelimit/${e}')`
  const code = `const out = {}; ${entries.map((e) => `out['${e}'] = Object.keys(${load(e)}).sort();`).join(' ')} console.log(JSON.stringify(out))`
  const flag = type === 'module' ? '--input-type=module' : '--input-type=commonjs'
  return JSON.parse(execFileSync(process.execPath, [flag, '-e', code], { cwd: pkg, encoding: 'utf8' }))
}

describe('built adapter entries', () => {
  it('export the same names to ESM and CJS, with no framework loaded at run time', () => {
    const esm = names('module')
    expect(names('commonjs')).toEqual(esm)
    for (const entry of entries) {
      for (const file of [`${entry}.js`, `${entry}.cjs`]) {
        const code = readFileSync(join(pkg, 'dist', file), 'utf8')
        expect(code, file).not.toMatch(/(from |require\()['"](express|fastify|hono|@hono\/[\w-]+)['"]/)
      }
    }
    expect(esm).toMatchInlineSnapshot(`
      {
        "express": [
          "expressRateLimit",
        ],
        "fastify": [
          "fastifyRateLimit",
        ],
        "fetch": [
          "bunPeer",
          "denoPeer",
          "withRateLimit",
        ],
        "hono": [
          "honoRateLimit",
        ],
        "node": [
          "nodeRateLimit",
        ],
      }
    `)
  })
})
