import { defineConfig } from 'tsup'

// The CLI is an application: one ESM bundle, dependencies stay external (installed with it).
// The library's HTTP internals (src/library.ts) are bundled until edgelimit exports them.
export default defineConfig({
  entry: { cli: 'src/cli.ts' },
  format: ['esm'],
  platform: 'node',
  target: 'node20',
  clean: true,
  sourcemap: true,
  dts: false,
  banner: { js: '#!/usr/bin/env node' },
})
