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
 * Whether two list fields are both draft-10 lists (`"api";…`), so that their members can be
 * listed together; a list in another draft's form is left as the upstream sent it.
 */
function sameForm(theirs: string, mine: string): boolean {
  return mine.charCodeAt(0) === 34 && theirs.trimStart().charCodeAt(0) === 34
}

/**
 * Puts the gateway's rate-limit fields (`extra`, lower-case names as `rateLimitHeaders` gives
 * them) on an answer whose forwarded upstream fields (`out`) hold at least one of the same names:
 * - draft-10's lists (`RateLimit`, `RateLimit-Policy`): the upstream's members, then the gateway's;
 * - a group that describes one policy — draft-7's `RateLimit` and `RateLimit-Policy`, draft-6's
 *   four, legacy's `X-RateLimit-*` — is the upstream's or the gateway's, whole, never mixed (a
 *   policy from one beside a remaining from the other would mean nothing): the gateway's, in place
 *   of all the upstream's, only when its remaining is lower than the upstream's;
 * - anything the gateway cannot compare (a field in another draft's form, a group without a
 *   remaining that is a number) stays as the upstream sent it.
 *
 * @example mergeRateLimitFields({ ratelimit: '"app";r=0;t=9' }, [['ratelimit', '"edge";r=5;t=60']])
 * // ratelimit: '"app";r=0;t=9, "edge";r=5;t=60'
 */
export function mergeRateLimitFields(out: OutgoingHttpHeaders, extra: Fields): void {
  const mine = new Map(extra)
  const draft6 = mine.has('ratelimit-limit')
  const draft7 = mine.get('ratelimit')?.startsWith('limit=') === true
  const legacy = mine.has(`${LEGACY}remaining`)
  // Each single-policy group: its field names in `out`, and each one's remaining.
  const groups: [names: string[], ours: number | undefined, theirs: number | undefined][] = []
  if (legacy) {
    const names = Object.keys(out).filter((name) => name.startsWith(LEGACY))
    for (const name of mine.keys()) if (name.startsWith(LEGACY) && !names.includes(name)) names.push(name)
    groups.push([names, count(mine.get(`${LEGACY}remaining`)), count(text(out[`${LEGACY}remaining`]))])
  }
  if (draft6) {
    groups.push([DRAFT6, count(mine.get('ratelimit-remaining')), count(text(out['ratelimit-remaining']))])
  }
  if (draft7) {
    // Never beside draft-6: a policy names one draft (ERR_HEADER_CONFLICT), so the policy is ours.
    const remaining = (value: string | undefined) => count(value && REMAINING.exec(value)?.[1])
    groups.push([
      ['ratelimit', 'ratelimit-policy'],
      remaining(mine.get('ratelimit')),
      remaining(text(out.ratelimit)),
    ])
  }
  const done = new Set<string>()
  for (const [names, ours, theirs] of groups) {
    // A blank field says nothing: as if the upstream had not sent it (as for draft-10 below).
    const upstream = names.some((name) => text(out[name])?.trim())
    const replace = !upstream || fewer(ours, theirs)
    for (const name of names) {
      done.add(name)
      if (!replace) continue
      const value = mine.get(name)
      if (value === undefined) delete out[name]
      else out[name] = value
    }
  }
  for (const [name, value] of mine) {
    if (done.has(name)) continue
    const theirs = text(out[name])
    if (theirs === undefined || theirs.trim() === '') out[name] = value
    else if (name === 'ratelimit' || name === 'ratelimit-policy') {
      if (sameForm(theirs, value)) out[name] = `${theirs}, ${value}`
    } else out[name] = value
  }
}
