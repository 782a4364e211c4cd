import { readFileSync } from 'node:fs'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  // Lua scripts are imported as text, as tsup's `loader: { '.lua': 'text' }` does in the build.
  plugins: [
    {
      name: 'lua-as-text',
      load(id) {
        if (id.endsWith('.lua')) return `export default ${JSON.stringify(readFileSync(id, 'utf8'))}`
      },
    },
  ],
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
})
