import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'

const src = join(import.meta.dirname, '..', 'src')

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return files(path)
    return path.endsWith('.ts') && !path.endsWith('.test.ts') ? [path] : []
  })
}

function imports(path: string): string[] {
  const text = readFileSync(path, 'utf8')
  return [...text.matchAll(/(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/g)].map((m) => m[1] as string)
}

describe('architecture (STYLE.md boundaries)', () => {
  const all = files(src)

  it('core/ imports nothing outside core/', () => {
    for (const file of all.filter((f) => relative(src, f).startsWith('core'))) {
      for (const spec of imports(file))
        expect(spec, `${relative(src, file)} imports ${spec}`).toMatch(/^\.\/[\w-]+\.js$/)
    }
  })

  it('nothing outside adapters, redis and the gateway touches node: or reads the clock', () => {
    for (const file of all) {
      const rel = relative(src, file)
      if (rel.startsWith('adapters') || rel.startsWith(join('stores', 'redis'))) continue
      for (const spec of imports(file))
        expect(spec, `${rel} imports ${spec}`).not.toMatch(/^node:|^(fs|path|crypto|os)$/)
      const text = readFileSync(file, 'utf8')
      expect(/\bBuffer\b|\bprocess\./.test(text), `${rel} uses a Node global`).toBe(false)
      // The decision deadline is the one timer outside adapters (set per call, always cleared),
      // with a Durable Object reset's: one per reset, left to run out with the Worker request (its
      // own few bytes: the DO addition has no room for deadline.ts's general one; ADR 0014).
      const deadlines = [join('resilience', 'deadline.ts'), join('stores', 'durable-object', 'store.ts')]
      const timers = deadlines.includes(rel) ? /setInterval/ : /setTimeout|setInterval/
      expect(timers.test(text), `${rel} uses a timer`).toBe(false)
      if (rel !== 'clock.ts' && !rel.startsWith('testing')) {
        expect(/Date\.now|performance\.now|new Date\(/.test(text), `${rel} reads the clock`).toBe(false)
      }
    }
  })

  it('the in-process path imports no remote-store machinery (remote stores bring it: Store.decider)', () => {
    // A value import (not `import type`) of resilience/ other than rollout would put the deadline,
    // breaker, denial cache and approximate sync into every memory-store app's bundle. index.ts
    // re-exports `remoteDecider` and `approximate` for the apps that use them (tree-shaken
    // otherwise; the bundle test checks it).
    for (const name of ['limiter.ts', 'decision.ts', 'options.ts', 'events.ts', 'clock.ts', 'index.ts']) {
      const text = readFileSync(join(src, name), 'utf8')
      const values = [...text.matchAll(/^(?:import|export) (?!type )[^'"]*?from\s+['"]([^'"]+)['"]/gm)].map(
        (m) => m[1] as string,
      )
      const remote = values.filter((spec) => /resilience\/(?!rollout)/.test(spec))
      expect(remote.sort(), name).toEqual(
        name === 'index.ts' ? ['./resilience/approximate.js', './resilience/remote.js'] : [],
      )
    }
    for (const file of all.filter((f) => relative(src, f).startsWith(join('stores', 'memory')))) {
      for (const spec of imports(file)) expect(spec, relative(src, file)).not.toMatch(/resilience/)
    }
  })

  it('nothing imports the adapters', () => {
    for (const file of all) {
      for (const spec of imports(file)) expect(spec).not.toMatch(/adapters\//)
    }
  })
})
