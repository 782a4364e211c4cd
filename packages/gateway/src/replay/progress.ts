import { int } from '../report/format.js'
import type { TextOut } from '../report/io.js'

/** A progress bar on a terminal: bytes read against the input size when known, else a line count. */
export interface Progress {
  update(p: { lines: number; bytes: number }): void
  done(): void
}

/** A bar on `out` when it is a TTY, else nothing. */
export function progressBar(out: TextOut, totalBytes: number | undefined): Progress {
  if (out.isTTY !== true) return { update() {}, done() {} }
  const started = performance.now()
  let last = 0
  return {
    update({ lines, bytes }) {
      const now = performance.now()
      if (now - last < 100) return
      last = now
      const rate = (lines / Math.max(1, now - started)) * 1000
      const tail = `${int(lines)} lines  ${int(rate)} lines/s`
      if (totalBytes === undefined || totalBytes === 0) {
        out.write(`\r\x1b[K  ${tail}`)
        return
      }
      const f = Math.min(1, bytes / totalBytes)
      const width = 30
      const full = Math.round(f * width)
      out.write(
        `\r\x1b[K  ${(f * 100).toFixed(0).padStart(3)}% [${'█'.repeat(full)}${'░'.repeat(width - full)}]  ${tail}`,
      )
    },
    done() {
      out.write('\r\x1b[K')
    },
  }
}
