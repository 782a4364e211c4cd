// What `npm pack` puts in each package's tarball: the built files, the README and the licence
// (copied in by prepack from the repository root), and nothing of the sources or tests.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..', '..', '..', '..')

function packed(workspace: string): string[] {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts=false'], {
    cwd: join(root, 'packages', workspace),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? []
}

describe('npm pack', () => {
  it.each([
    ['edgelimit', ['dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/http.cjs']],
    ['gateway', ['bin/edgelimit.js', 'dist/cli.js', 'schema/edgelimit.schema.json']],
  ])('%s: README, LICENSE, package.json and the built files; no sources or tests', (workspace, built) => {
    const files = packed(workspace)
    expect(files).toEqual(expect.arrayContaining(['README.md', 'LICENSE', 'package.json', ...built]))
    expect(
      files.filter(
        (f) =>
          /^(src|test)\//.test(f) || (f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.endsWith('.d.cts')),
      ),
    ).toEqual([])
  })

  // The package page (npmjs.com, unpkg) is away from the repository: a relative link there led
  // nowhere. The packed README names the repository path instead; links out are kept.
  it('edgelimit: the packed README has no relative links, and names the paths they led to', () => {
    const dir = mkdtempSync(join(tmpdir(), 'edgelimit-pack-'))
    try {
      const out = execFileSync(
        'npm',
        ['pack', '--json', '--ignore-scripts=false', '--pack-destination', dir],
        {
          cwd: join(root, 'packages', 'edgelimit'),
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      )
      const tarball = join(dir, (JSON.parse(out) as { filename: string }[])[0]?.filename ?? '')
      const packedReadme = execFileSync('tar', ['-xzOf', tarball, 'package/README.md'], { encoding: 'utf8' })
      const source = readFileSync(join(root, 'README.md'), 'utf8')
      const relative = /\]\((?![a-z][a-z0-9+.-]*:|#)[^)]+\)/gi
      expect(source.match(relative)?.length ?? 0).toBeGreaterThan(0)
      expect(packedReadme.match(relative)).toBeNull()
      expect(packedReadme).toContain('see `docs/gateway.md` in the edgelimit repository')
      expect(packedReadme).toContain(
        '(ADR 0010, `docs/decisions/0010-lowercase-header-names.md` in the edgelimit repository)',
      )
      // Everything else as written, links out included.
      expect(packedReadme.length).toBeGreaterThan(source.length * 0.95)
      expect(packedReadme.match(/\]\(https?:[^)]+\)/g)).toEqual(source.match(/\]\(https?:[^)]+\)/g))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  // npm links a package's command at install time only when its file exists: a command pointing
  // into dist/ (built after `npm install` in a clone) was not linked, and `npx edgelimit` found
  // nothing to run. CI installs a clean clone before it builds, as a user does.
  it('the edgelimit command is linked by the install and runs the CLI', () => {
    const out = execFileSync(join(root, 'node_modules', '.bin', 'edgelimit'), ['--version'], {
      encoding: 'utf8',
    })
    expect(out).toMatch(/^edgelimit \d+\.\d+\.\d+ \(Node v/)
  })
})
