/** A position in the policy document: map keys and sequence indexes from the root. */
export type Path = readonly (string | number)[]

/** One problem in a policy file: where (file, line, path), what kind (code) and what was expected. */
export interface Issue {
  readonly path: Path
  readonly code: string
  readonly message: string
  readonly file?: string
  /** 1-based; 0 when the problem has no place in the file (an unreadable file). */
  readonly line?: number
  readonly column?: number
  /** `key`: the problem is the map key itself (an unknown field), not its value. */
  readonly at?: 'key' | 'value'
}

/** Thrown when a policy cannot be loaded; carries every problem found. */
export class PolicyError extends Error {
  readonly issues: readonly Issue[]
  constructor(issues: readonly Issue[]) {
    super(
      `Invalid policy (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${listIssues(issues)
        .map((line) => `  ${line}`)
        .join('\n')}`,
    )
    this.name = 'PolicyError'
    this.issues = issues
  }
}

const IDENTIFIER = /^[A-Za-z_][\w-]*$/

/** `rules[2].match.headers["x-api-key"]`: the style of the library's option errors. */
export function formatPath(path: Path): string {
  let out = ''
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`
    else if (IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`
    else out += `[${JSON.stringify(segment)}]`
  }
  return out === '' ? '(root)' : out
}

/** Reads a library option path (`rules[0].algorithm.limit`) back into segments. */
export function parsePath(text: string): (string | number)[] {
  const out: (string | number)[] = []
  for (const m of text.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (m[2] !== undefined) out.push(Number(m[2]))
    else if (m[1] !== undefined) out.push(m[1])
  }
  return out
}

/** `file:line:column  path  message  [CODE]`, the line editors and CI logs link. */
export function formatIssue(issue: Issue): string {
  const where =
    issue.file === undefined
      ? ''
      : `${issue.file}${issue.line ? `:${issue.line}${issue.column ? `:${issue.column}` : ''}` : ''}  `
  return `${where}${formatPath(issue.path)}: ${issue.message} [${issue.code}]`
}

/** Problems listed per file: a generated file can hold hundreds of thousands; the rest are counted. */
export const MAX_LISTED_ISSUES = 1000

/**
 * One line per problem (`formatIssue`), the first `MAX_LISTED_ISSUES` of them, then `… and N more`.
 *
 * @example process.stderr.write(`${listIssues(issues).join('\n')}\n`)
 */
export function listIssues(issues: readonly Issue[]): string[] {
  const lines = issues.slice(0, MAX_LISTED_ISSUES).map(formatIssue)
  if (issues.length > MAX_LISTED_ISSUES) lines.push(`… and ${issues.length - MAX_LISTED_ISSUES} more`)
  return lines
}
