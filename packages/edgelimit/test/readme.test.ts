import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { expectedLines, withinWindows } from './support/examples.js'
import { type RedisServer, startRedis } from './support/redis.js'

const root = join(import.meta.dirname, '..', '..', '..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] as string)

describe('README examples run as written', () => {
  // The Redis example reads REDIS_URL: point it at a server of the test's own.
  let redis: RedisServer
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(() => redis?.stop())

  it('has examples', () => expect(blocks.length).toBeGreaterThanOrEqual(8))
  blocks.forEach((code, i) => {
    it(`example ${i + 1}: ${code.split('\n').find((l) => l.startsWith('//')) ?? code.split('\n')[0]}`, async () => {
      // Run again if it spanned the end of a window it counts in on the system clock.
      const stdout = await withinWindows(code, () =>
        execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: root, encoding: 'utf8' }),
      )
      const expected = expectedLines(code)
      const printed = stdout.trim().split('\n')
      if (expected.length > 0) expect(printed).toEqual(expected)
    })
  })
})

describe("the README's Decision table", () => {
  it('names every reason a decision can carry (DenyReason and DecisionReason in the source)', () => {
    const src = (file: string) => readFileSync(join(root, 'packages', 'edgelimit', 'src', file), 'utf8')
    const union = (text: string, name: string) =>
      [...(new RegExp(`export type ${name} = ([^\\n]+)`).exec(text)?.[1] ?? '').matchAll(/'([\w-]+)'/g)].map(
        (m) => m[1] as string,
      )
    const reasons = [
      ...union(src('core/types.ts'), 'DenyReason'),
      ...union(src('decision.ts'), 'DecisionReason'),
    ]
    expect(reasons).toContain('store-unavailable')
    const row = readme.split('\n').find((l) => l.startsWith('| `reason`')) ?? ''
    expect(reasons.filter((r) => !row.includes(`\`'${r}'\``))).toEqual([])
  })
})
