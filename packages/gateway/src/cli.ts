import { main } from './main.js'

const command = process.argv[2]

// A server exits once drained (or failed to start), and a bench once done, whatever handles a
// client library may keep open.
const exit = (code: number) => {
  if (command === 'serve' || command === 'bench') process.exit(code)
  process.exitCode = code
}

// A reader that has gone (`edgelimit simulate --list | head -1`): the rest of the output goes
// nowhere, quietly, and the command keeps its own exit code (`replay --fail-on-block | head` still
// exits 1 on a block, so a CI step with pipefail sees it). A standard output that cannot be written
// (a full disk) is an output error.
if (command !== 'serve')
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') {
      process.stdout.write = (() => true) as typeof process.stdout.write
      return
    }
    process.stderr.write(`edgelimit ${command}: cannot write to standard output: ${error.message}\n`)
    process.exit(2)
  })

// A standard error that has gone or cannot be written (`2>&1 | head`, a full disk): progress and
// messages go nowhere (there is nowhere left to say so) and the command keeps its exit code.
// Unhandled, the write error ended any command with exit 1.
process.stderr.on('error', () => {
  process.stderr.write = (() => true) as typeof process.stderr.write
})

main(process.argv.slice(2)).then(exit, (error: unknown) => {
  process.stderr.write(`edgelimit: ${error instanceof Error ? error.message : String(error)}\n`)
  exit(1)
})
