/**
 * Reading documented examples: the output an example states next to its `console.log` calls.
 * Shared by readme.test.ts and docs-examples.test.ts.
 */

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
