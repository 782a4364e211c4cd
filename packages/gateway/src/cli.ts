import { main } from './main.js'

// A server exits once drained (or failed to start), and a bench once done, whatever handles a
// client library may keep open.
const exit = (code: number) => {
  if (process.argv[2] === 'serve' || process.argv[2] === 'bench') process.exit(code)
  process.exitCode = code
}

main(process.argv.slice(2)).then(exit, (error: unknown) => {
  process.stderr.write(`edgelimit: ${error instanceof Error ? error.message : String(error)}\n`)
  exit(1)
})
