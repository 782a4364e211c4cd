import { relative } from 'node:path'
import { listIssues } from './config/issues.js'
import { readPolicySource } from './config/source.js'
import { checkSource } from './config/validate.js'

/** What `edgelimit check` found in each file. */
export interface CheckReport {
  readonly ok: boolean
  /**
   * One line per problem (`file:line:column  path: message [CODE]`; the first 1,000 of a file, then
   * `… and N more`) or per valid file.
   */
  readonly lines: readonly string[]
}

/** How a policy read from standard input (`-`) is named in the report. */
const STDIN_NAME = '<stdin>'

/**
 * Validates policy files offline (`-` is standard input) (no store or upstream is contacted): for CI and deploys.
 *
 * @example const { ok, lines } = checkFiles(['edgelimit.yaml']); process.exitCode = ok ? 0 : 1
 */
export function checkFiles(
  files: readonly string[],
  env?: Readonly<Record<string, string | undefined>>,
): CheckReport {
  const lines: string[] = []
  let ok = true
  for (const file of files) {
    const stdin = file === '-'
    const near = relative(process.cwd(), file)
    const shown = stdin ? STDIN_NAME : near === '' || near.startsWith('..') ? file : near
    const source = stdin ? readPolicySource(STDIN_NAME, env, 0) : readPolicySource(file, env)
    const { config, issues } = checkSource({ ...source, place: (i) => ({ ...source.place(i), file: shown }) })
    if (config === undefined) {
      ok = false
      const sorted = [...issues].sort(
        (a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0),
      )
      lines.push(...listIssues(sorted.map((issue) => ({ ...issue, file: shown }))))
      lines.push(`✖ ${shown}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`)
    } else {
      const tiers = config.rules.reduce((n, r) => n + (r.tiers === undefined ? 0 : 1), 0)
      lines.push(
        `✔ ${shown}: ${config.rules.length} rule${config.rules.length === 1 ? '' : 's'}${tiers > 0 ? ` (${tiers} tiered)` : ''}, ${config.store.type} store`,
      )
    }
  }
  return { ok, lines }
}
