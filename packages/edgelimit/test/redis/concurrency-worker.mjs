// One OS process of the concurrency test: waits for "go" on stdin, then fires `calls` concurrent
// limit() calls at one key and prints how many were admitted.
// argv: <mode standalone|cluster> <ports comma-separated> <algorithm> <key> <calls> <prefix> <window>
// (<window>: the windows' length, e.g. '365d': one whose end the run cannot cross, as they count on
// Redis TIME, epoch-aligned)

import {
  createLimiter,
  fixedWindow,
  gcra,
  leakyBucket,
  slidingLog,
  slidingWindow,
  tokenBucket,
} from 'edgelimit'
import { redisStore } from 'edgelimit/redis'
import { Cluster, Redis } from 'ioredis'

const [mode, ports, algorithm, key, calls, prefix, window] = process.argv.slice(2)
// Limit 100 and rates slow enough that nothing refills during the test.
const algorithms = {
  'fixed-window': fixedWindow({ limit: 100, window }),
  'sliding-log': slidingLog({ limit: 100, window: '1h' }),
  'sliding-window': slidingWindow({ limit: 100, window }),
  'token-bucket': tokenBucket({ capacity: 100, refillRate: 1, refillInterval: '1h' }),
  'leaky-police': leakyBucket({ capacity: 100, leakRate: 1, leakInterval: '1h' }),
  'leaky-shape': leakyBucket({ capacity: 99, leakRate: 1, leakInterval: '1h', mode: 'shape' }),
  gcra: gcra({ limit: 100, period: '100h' }),
}
const nodes = ports.split(',').map((port) => ({ host: '127.0.0.1', port: Number(port) }))
const client = mode === 'cluster' ? new Cluster(nodes) : new Redis(nodes[0])
const limiter = createLimiter({
  rules: [{ name: algorithm, algorithm: algorithms[algorithm] }],
  store: redisStore({ client, prefix }),
  // Store atomicity alone: no deadline, breaker or denial cache in between.
  timeout: false,
  breaker: false,
  denyCache: false,
})
// Warm the connection (and the cluster's slot map) before the start signal.
await limiter.peek(`${key}:warm`)
process.stdout.write('ready\n')
process.stdin.once('data', async () => {
  const results = await Promise.allSettled(Array.from({ length: Number(calls) }, () => limiter.limit(key)))
  const failed = results.filter((r) => r.status === 'rejected').length
  const admitted = results.filter((r) => r.status === 'fulfilled' && r.value.allowed).length
  process.stdout.write(`${JSON.stringify({ admitted, failed })}\n`)
  await client.quit()
  process.exit(0)
})
