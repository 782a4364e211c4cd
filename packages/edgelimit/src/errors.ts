/** Codes carried by every edgelimit error. */
export type ErrorCode =
  | 'ERR_EDGELIMIT_CLOCK'
  | 'ERR_EDGELIMIT_CONFIG'
  | 'ERR_EDGELIMIT_COST'
  | 'ERR_EDGELIMIT_KEY'
  | 'ERR_EDGELIMIT_ON_LIMITED'
  | 'ERR_EDGELIMIT_SYNC_UNSUPPORTED'
  | 'ERR_EDGELIMIT_THROWN'
  | 'ERR_EDGELIMIT_STORE'
  | 'ERR_EDGELIMIT_TIMEOUT'

/** An error with a stable `code`; denials are never errors (they are decisions). */
export class EdgelimitError extends Error {
  declare readonly code: ErrorCode
  constructor(code: ErrorCode, message: string) {
    super(message)
    // Declared, not defined, fields: assigned here, in the order they were defined before.
    this.code = code
    this.name = 'EdgelimitError'
  }
}

/** One problem found in options: where, what kind, and what was expected. */
export interface ConfigIssue {
  /** Where the problem is, e.g. `rules[2].algorithm.window`. */
  readonly path: string
  /** A stable code, e.g. `ERR_DURATION`. */
  readonly code: string
  readonly message: string
}

/** Thrown once for invalid options, listing every problem found. */
export class ConfigError extends EdgelimitError {
  declare readonly issues: readonly ConfigIssue[]
  constructor(issues: readonly ConfigIssue[]) {
    super(
      'ERR_EDGELIMIT_CONFIG',
      `Invalid edgelimit options (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n${issues
        .map((i) => `  - ${i.path}: ${i.message} [${i.code}]`)
        .join('\n')}`,
    )
    this.name = 'ConfigError'
    this.issues = issues
  }
}

/** Describes a value for error messages: `"60 sec" (string)`. */
export function describe(value: unknown): string {
  const type = typeof value
  if (type === 'string' || type === 'number' || type === 'boolean')
    return `${type === 'string' ? JSON.stringify(value) : value} (${type})`
  if (value === null || value === undefined) return String(value)
  if (Array.isArray(value)) return value.length ? 'an array' : 'an empty array'
  return type === 'object' ? 'an object' : `a ${type}`
}
