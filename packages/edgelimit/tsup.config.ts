import { defineConfig } from 'tsup'

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    redis: 'src/redis.ts',
    http: 'src/http.ts',
    'testing/index': 'src/testing/index.ts',
    fetch: 'src/adapters/fetch.ts',
    node: 'src/adapters/node.ts',
    express: 'src/adapters/express.ts',
    fastify: 'src/adapters/fastify.ts',
    hono: 'src/adapters/hono.ts',
    cloudflare: 'src/cloudflare.ts',
  },
  loader: { '.lua': 'text' },
  // Provided by the Workers runtime.
  external: ['cloudflare:workers'],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  target: 'es2022',
  platform: 'neutral',
  treeshake: true,
  // Shared chunks for CJS too (ESM splits by default): one EdgelimitError class per module system,
  // so `instanceof` and the adapters' checks hold across entry points under require().
  splitting: true,
})
