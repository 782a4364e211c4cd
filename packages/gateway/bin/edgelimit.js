#!/usr/bin/env node
// The `edgelimit` command. A committed launcher, not dist/cli.js itself: npm links a package's
// command at install time only when its file is there, and dist/ is built after `npm install` in
// a clone, so `npx edgelimit` found nothing to run there.
import { existsSync } from 'node:fs'

const cli = new URL('../dist/cli.js', import.meta.url)
if (existsSync(cli)) await import(cli.href)
else {
  process.stderr.write('edgelimit: the gateway is not built yet; run `npm run build` first\n')
  process.exitCode = 2
}
