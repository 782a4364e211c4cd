import { main } from './main.js'

main(process.argv.slice(2)).then(
  (code) => {
    // A server exits once drained, and a bench once done, whatever handles a client library may keep open.
    if (process.argv[2] === 'serve' || process.argv[2] === 'bench') process.exit(code)
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`edgelimit: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  },
)
