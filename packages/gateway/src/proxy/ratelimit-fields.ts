import type { OutgoingHttpHeaders } from 'node:http'

// The gateway's rate-limit fields on an answer whose upstream sent its own. An intermediary must
// not make the upstream's policy look more permissive (draft-10 §7.2), so the upstream's fields
// are never dropped for the gateway's unless the gateway's say less is left.

type Fields = readonly (readonly [string, string])[]

/** The draft-6 fields, which describe one policy together. */
const DRAFT6 = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy']
const LEGACY = 'x-ratelimit-'
// A draft-7 `RateLimit` dictionary's `remaining` member.
const REMAINING = /(?:^|,)\s*remaining=(\d+)\s*(?:[,;]|$)/

/** A forwarded field's value as one line (lines joined as RFC 9110 §5.3 combines them). */
function text(value: OutgoingHttpHeaders[string]): string | undefined {
  if (value === undefined) return undefined
  return Array.isArray(value) ? value.join(', ') : String(value)
}

/** A remaining quota as a field gives it (`/^\d+$/`), or `undefined` when it is not one. */
function count(value: string | undefined): number | undefined {
  const trimmed = value?.trim()
  return trimmed !== undefined && /^\d+$/.test(trimmed) ? Number(trimmed) : undefined
}

/** Whether ours (`mine`) says less is left than theirs; `false` when theirs cannot be read. */
function fewer(mine: number | undefined, theirs: number | undefined): boolean {
  return mine !== undefined && theirs !== undefined && mine < theirs
}

/**
 * Whether two list fields are in one draft's form, so that their members can be listed together:
 * draft-10's members are names (`"api";…`), draft-7's and draft-6's policies quotas (`100;w=60`).
 */
function sameForm(theirs: string, mine: string): boolean {
  const first = theirs.trimStart().charCodeAt(0)
  const quoted = mine.charCodeAt(0) === 34
  return quoted ? first === 34 : first >= 48 && first <= 57
}

/**
 * Puts the gateway's rate-limit fields (`extra`, lower-case names as `rateLimitHeaders` gives
 * them) on an answer whose forwarded upstream fields (`out`) hold at least one of the same names:
 * - list fields (draft-10 `RateLimit` and `RateLimit-Policy`, draft-7 `RateLimit-Policy`):
 *   the upstream's members, then the gateway's, when both are in one draft's form;
 * - draft-7 `RateLimit` (one policy): the gateway's only when its `remaining` is lower;
 * - the draft-6 and the legacy fields: each group whole, the gateway's only when its
 *   `-Remaining` is lower (a limit from one beside a remaining from the other would mean nothing);
 * - anything the gateway cannot compare (a field in another draft's form, a remaining that is no
 *   number) stays as the upstream sent it.
 *
 * @example mergeRateLimitFields({ ratelimit: '"app";r=0;t=9' }, [['ratelimit', '"edge";r=5;t=60']])
 * // ratelimit: '"app";r=0;t=9, "edge";r=5;t=60'
 */
export function mergeRateLimitFields(out: OutgoingHttpHeaders, extra: Fields): void {
  const mine = new Map(extra)
  const draft6 = mine.has('ratelimit-limit')
  const ours = (group: readonly string[], remaining: string) =>
    group.every((name) => out[name] === undefined) ||
    fewer(count(mine.get(remaining)), count(text(out[remaining])))
  const legacyOurs = ours(
    [...mine.keys()].filter((name) => name.startsWith(LEGACY)),
    `${LEGACY}remaining`,
  )
  const draft6Ours = draft6 && ours(DRAFT6, 'ratelimit-remaining')
  for (const [name, value] of mine) {
    const theirs = text(out[name])
    if (name.startsWith(LEGACY)) {
      if (legacyOurs) out[name] = value
    } else if (draft6 && DRAFT6.includes(name)) {
      if (draft6Ours) out[name] = value
    } else if (theirs === undefined || theirs.trim() === '') {
      out[name] = value
    } else if (name === 'ratelimit' && value.startsWith('limit=')) {
      if (fewer(count(REMAINING.exec(value)?.[1]), count(REMAINING.exec(theirs)?.[1]))) out[name] = value
    } else if (name === 'ratelimit' || name === 'ratelimit-policy') {
      if (sameForm(theirs, value)) out[name] = `${theirs}, ${value}`
    } else {
      out[name] = value
    }
  }
}
