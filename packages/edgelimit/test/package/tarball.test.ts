// What `npm pack` puts in each package's tarball: the built files, the README and the licence
// (copied in by prepack from the repository root), and nothing of the sources or tests.
import { execFileSync } from 'node:child_process'
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
