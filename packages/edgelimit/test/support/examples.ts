/**
 * Reading documented examples: the output an example states next to its `console.log` calls, and
 * a run of one that no end of its windows falls within. Shared by readme.test.ts and
 * docs-examples.test.ts.
 */
import { parseDuration } from '../../src/duration.js'
import { crossedBoundary } from './window.js'

/** `console.log(x) // expected` — and a following `// expected` line for a long call. */
export function expectedLines(code: string): string[] {
  const out: string[] = []
  const lines = code.split('\n')
  lines.forEach((line, i) => {
    const inline = /console\.log\(.*\) \/\/ (.+)$/.exec(line)
    if (inline) out.push(inline[1] as string)
    else if (/console\.log\(/.test(line)) {
      // Expected output on the comment lines that follow the call (or the loop holding it).
      let j = i + 1
      while (j < lines.length && !/^\/\/ /.test(lines[j] as string) && /^\s|^\}/.test(lines[j] as string)) j++
      while (j < lines.length && /^\/\/ /.test(lines[j] as string)) out.push((lines[j++] as string).slice(3))
    }
  })
  return out
}

/** A fixed window's or a sliding-window counter's length, as an example writes it. */
const ALIGNED = /\b(?:fixedWindow|slidingWindow)\(\{[^}]*\bwindow: '([^']+)'/g

/**
 * Runs an example and, when the run spanned the end of one of the epoch-aligned windows it counts
 * in on the system clock (or on Redis TIME, the same clock), runs it once more: across a window's
 * end it rightly counts afresh and may print other counts than it states. The second run starts
 * after that end, so only a window shorter than a run could end within it too (an example on a
 * manual clock prints the same either way).
 *
 * @example const stdout = await withinWindows(code, () => execFileSync(node, ['-e', code]))
 */
export async function withinWindows<T>(code: string, run: () => T | Promise<T>): Promise<T> {
  const windows = [...code.matchAll(ALIGNED)].flatMap((m) => parseDuration(m[1]) ?? [])
  const from = Date.now()
  const first = await run()
  return crossedBoundary(windows, from, Date.now()) ? run() : first
}
