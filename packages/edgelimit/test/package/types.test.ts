// The package's types resolve for a TypeScript consumer under every module resolution in use:
// node10 (the default with `module: commonjs`, through `types` and `typesVersions`), node16,
// nodenext and bundler (through `exports`). Each import must have its real type, not `any`, and
// the declaration files themselves must check (`skipLibCheck: false`), with the DOM's types or
// with the Workers' (the example Worker, under its own tsconfig).
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const pkg = join(import.meta.dirname, '..', '..')
const tsc = join(pkg, '..', '..', 'node_modules', 'typescript', 'bin', 'tsc')
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** Every entry point, and one export of each. */
const IMPORTS: [entry: string, name: string][] = [
  ['edgelimit', 'createLimiter'],
  ['edgelimit/testing', 'manualClock'],
  ['edgelimit/redis', 'redisStore'],
  ['edgelimit/http', 'clientKey'],
  ['edgelimit/fetch', 'withRateLimit'],
  ['edgelimit/node', 'nodeRateLimit'],
  ['edgelimit/express', 'expressRateLimit'],
  ['edgelimit/fastify', 'fastifyRateLimit'],
  ['edgelimit/hono', 'honoRateLimit'],
  ['edgelimit/cloudflare', 'durableObjectStore'],
]

/** What tsc prints for a project: '' when it checks. */
function check(project: string): string {
  try {
    execFileSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8' })
    return ''
  } catch (error) {
    return String((error as { stdout?: string }).stdout ?? error)
  }
}

function consumer(resolution: string, module: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'edgelimit-types-'))
  dirs.push(dir)
  mkdirSync(join(dir, 'node_modules'))
  symlinkSync(pkg, join(dir, 'node_modules', 'edgelimit'), 'dir')
  // hono's own types, as an app that uses edgelimit/hono has them.
  symlinkSync(join(pkg, '..', '..', 'node_modules', 'hono'), join(dir, 'node_modules', 'hono'), 'dir')
  const lines = IMPORTS.flatMap(([entry, name], i) => [
    `import { ${name} as v${i} } from '${entry}'`,
    // A function, not `any`: assigning it to a number must be an error.
    `// @ts-expect-error ${entry} is typed`,
    `export const n${i}: number = v${i}`,
  ])
  writeFileSync(join(dir, 'index.ts'), `${lines.join('\n')}\n`)
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        module,
        moduleResolution: resolution,
        target: 'es2022',
        lib: ['es2022', 'dom'],
        types: [],
      },
      files: ['index.ts'],
    }),
  )
  return dir
}

describe('types for a TypeScript consumer', () => {
  it.each([
    ['node10', 'commonjs'],
    ['node16', 'node16'],
    ['nodenext', 'nodenext'],
    ['bundler', 'esnext'],
  ])('moduleResolution %s (module %s): every entry point resolves to its types', (resolution, module) => {
    expect(check(consumer(resolution, module))).toBe('')
  })

  it('the example Worker checks with the Workers types, no DOM, skipLibCheck: false', () => {
    // examples/cloudflare-worker/tsconfig.json: lib ES2022, types @cloudflare/workers-types.
    expect(check(join(pkg, '..', '..', 'examples', 'cloudflare-worker'))).toBe('')
  })
})
