// Runs one benchmark: `node bench/run.mjs <name> [options]` runs bench/<name>.mjs with the options.
// It does not build; `npm run bench:<name>` builds first.
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const dir = path.dirname(fileURLToPath(import.meta.url))
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.mjs') && f !== 'run.mjs')
  .map((f) => f.slice(0, -'.mjs'.length))
const [name, ...options] = process.argv.slice(2)

if (name === undefined || !names.includes(name)) {
  console.error(`usage: node bench/run.mjs <${names.join('|')}> [options]`)
  process.exit(name === undefined ? 2 : 1)
}
const child = spawnSync(process.execPath, [path.join(dir, `${name}.mjs`), ...options], { stdio: 'inherit' })
process.exit(child.status ?? 1)
