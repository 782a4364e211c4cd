// The adapter pages list every option of RateLimitOptions: the list is read off the source
// interface, so an option added there fails here until the pages name it.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..', '..', '..')
const source = readFileSync(join(root, 'packages', 'edgelimit', 'src', 'http', 'rate-limit.ts'), 'utf8')
const body = source.slice(
  source.indexOf('export interface RateLimitOptions {'),
  source.indexOf('export interface HttpRateLimit {'),
)
// Members sit two spaces in; the parameter types of `onLimited` sit deeper.
const declared = [...body.matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1] as string)

describe('adapter docs list every RateLimitOptions option', () => {
  it('reads the options off the interface', () => {
    expect(declared).toContain('limiter')
    expect(declared).toContain('partitionKey')
    expect(declared.length).toBeGreaterThanOrEqual(11)
  })
  it('the HTTP layer accepts exactly these names (any other is ERR_UNKNOWN_OPTION)', () => {
    const names = /`(limiter [\w ]+)\$\{names\}`/.exec(source)?.[1]
    expect(names?.split(' ').sort()).toEqual([...declared].sort())
  })
  for (const adapter of ['fetch', 'node', 'express', 'fastify', 'hono']) {
    it(`docs/adapters/${adapter}.md`, () => {
      const page = readFileSync(join(root, 'docs', 'adapters', `${adapter}.md`), 'utf8')
      const start = page.indexOf('\nOptions:')
      expect(start, 'an "Options:" paragraph').toBeGreaterThan(-1)
      const paragraph = page.slice(start, page.indexOf('\n\n', start + 1))
      expect(declared.filter((name) => !paragraph.includes(`\`${name}\``))).toEqual([])
    })
  }
})
