/** Text formatting shared by the `simulate` and `replay` tables. */

/** `1234567` → `1,234,567`. */
export function int(n: number): string {
  return Math.round(n).toLocaleString('en-US')
}

/**
 * A count and its noun, singular for 1: `1 request`, `2,300 requests`.
 *
 * @example counted(1, 'malformed line') // '1 malformed line'
 */
export function counted(n: number, noun: string): string {
  return `${int(n)} ${noun}${n === 1 ? '' : 's'}`
}

/** A share as a percentage with enough digits to show small values: `0.0031 %`. */
export function pct(part: number, whole: number): string {
  if (whole === 0) return '—'
  const p = (100 * part) / whole
  if (p === 0) return '0 %'
  const digits = p >= 10 ? 1 : p >= 1 ? 2 : p >= 0.01 ? 3 : 4
  return `${p.toFixed(digits)} %`
}

/** Milliseconds as a short human duration: `850 ms`, `12.5 s`, `3 m 20 s`, `2 h 5 m`. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms)) return '—'
  if (Math.round(ms) < 1000) return `${Math.round(ms)} ms`
  // Each unit is rounded before it is split, so that 59.96 s is `1 m`, not `60 s`.
  const seconds = Number((ms / 1000).toFixed(ms < 10_000 ? 2 : 1))
  if (seconds < 60) return `${seconds} s`
  const s = Math.round(ms / 1000)
  if (s < 3600) return s % 60 === 0 ? `${s / 60} m` : `${Math.floor(s / 60)} m ${s % 60} s`
  const m = Math.round(ms / 60_000)
  return m % 60 === 0 ? `${m / 60} h` : `${Math.floor(m / 60)} h ${m % 60} m`
}

/** An ISO-8601 UTC time without milliseconds: `2015-05-17T10:05:03Z`; `—` outside the Date range. */
export function isoTime(ms: number): string {
  const date = new Date(ms)
  return Number.isNaN(date.getTime()) ? '—' : date.toISOString().replace('.000Z', 'Z')
}

/**
 * Control characters (C0, DEL, C1) as `\xNN`: text from a log (a forged user agent, a malformed
 * line) is shown on a terminal, never run as an escape sequence.
 * @example quoteControls('\x1b[2J') // '\\x1b[2J'
 */
export function quoteControls(text: string): string {
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
}

/** Column alignment: left or right. */
export type Align = 'l' | 'r'

/**
 * A plain-text table with a header rule, columns padded to their widest cell; control characters
 * in a cell are quoted (`quoteControls`).
 * @example table(['a', 'b'], [['1', '2']], ['l', 'r'])
 */
export function table(
  headers: readonly string[],
  cells: readonly (readonly string[])[],
  align: readonly Align[],
) {
  const rows = cells.map((r) => r.map(quoteControls))
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (align[i] === 'r' ? c.padStart(widths[i] as number) : c.padEnd(widths[i] as number)))
      .join('  ')
      .trimEnd()
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}
