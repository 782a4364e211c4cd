import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, startRedis } from './support/redis.js'

const root = join(import.meta.dirname, '..', '..', '..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] as string)

/** `console.log(x) // expected` — and a following `// expected` line for a long call. */
function expectedLines(code: string): string[] {
  const out: string[] = []
  const lines = code.split('\n')
  lines.forEach((line, i) => {
    const inline = /console\.log\(.*\) \/\/ (.+)$/.exec(line)
    if (inline) out.push(inline[1] as string)
    else if (/console\.log\(/.test(line)) {
      // Expected output on the comment lines that follow the call (or the loop holding it).
      let j = i + 1
      while (j < lines.length && !/^\/\/ /.test(lines[j] as string) && /^\s|^\}/.test(lines[j] as string)) j++
      while (j < lines.length && /^\/\/ /.test(lines[j] as string)) out.push((lines[j++] as string).slice(3))
    }
  })
  return out
}

describe('README examples run as written', () => {
  // The Redis example reads REDIS_URL: point it at a server of the test's own.
  let redis: RedisServer
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(() => redis?.stop())

  it('has examples', () => expect(blocks.length).toBeGreaterThanOrEqual(8))
  blocks.forEach((code, i) => {
    it(`example ${i + 1}: ${code.split('\n').find((l) => l.startsWith('//')) ?? code.split('\n')[0]}`, () => {
      const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', code], {
        cwd: root,
        encoding: 'utf8',
      })
      const expected = expectedLines(code)
      const printed = stdout.trim().split('\n')
      if (expected.length > 0) expect(printed).toEqual(expected)
    })
  })
})
