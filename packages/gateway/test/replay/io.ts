import type { CliIo } from '../../src/report/io.js'

/** An io that captures what a command writes. */
export function captureIo(cwd: string, tty = false): CliIo & { out: () => string; err: () => string } {
  let out = ''
  let err = ''
  return {
    stdout: { write: (s: string) => (out += s), isTTY: tty },
    stderr: { write: (s: string) => (err += s), isTTY: tty },
    cwd,
    out: () => out,
    err: () => err,
  }
}
