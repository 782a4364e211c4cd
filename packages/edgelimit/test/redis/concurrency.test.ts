import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../support/redis.js'
import { farWindow } from '../support/window.js'

const worker = join(import.meta.dirname, 'concurrency-worker.mjs')
const ALGORITHMS = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-police',
  'leaky-shape',
  'gcra',
]
const PROCESSES = 4
const CALLS = 500
/** The fixed and sliding windows' length: a burst that spanned the end of one would admit up to 200. */
const WINDOW = farWindow()

/** Starts a worker and resolves once it has connected. */
function startWorker(
  args: string[],
): Promise<{ child: ChildProcessWithoutNullStreams; lines: AsyncIterator<string> }> {
  const child = spawn(process.execPath, [worker, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => {
    stderr += d
  })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  return lines.next().then(({ value }) => {
    if (value !== 'ready') throw new Error(`worker did not start: ${value} ${stderr}`)
    return { child, lines }
  })
}

/** 4 processes × 500 concurrent calls on one fresh key; returns the admitted count. */
async function burst(mode: 'standalone' | 'cluster', ports: number[], algorithm: string, run: number) {
  const key = `burst:${algorithm}:${run}:${Date.now()}`
  const workers = await Promise.all(
    Array.from({ length: PROCESSES }, () =>
      startWorker([mode, ports.join(','), algorithm, key, String(CALLS), 'conc', WINDOW]),
    ),
  )
  for (const w of workers) w.child.stdin.write('go\n')
  const results = await Promise.all(
    workers.map(
      async (w) => JSON.parse((await w.lines.next()).value as string) as { admitted: number; failed: number },
    ),
  )
  return {
    admitted: results.reduce((s, r) => s + r.admitted, 0),
    failed: results.reduce((s, r) => s + r.failed, 0),
  }
}

describe('concurrency: 4 processes × 500 concurrent calls admit exactly 100', () => {
  describe('standalone Redis', () => {
    let redis: RedisServer
    beforeAll(async () => {
      redis = await startRedis()
    })
    afterAll(() => redis?.stop())
    for (const algorithm of ALGORITHMS) {
      it(`${algorithm}, 5 runs`, async () => {
        for (let run = 0; run < 5; run++) {
          expect(await burst('standalone', [redis.port], algorithm, run)).toEqual({
            admitted: 100,
            failed: 0,
          })
        }
      })
    }
  })

  describe('Redis Cluster (3 masters + 3 replicas)', () => {
    let cluster: RedisCluster
    beforeAll(async () => {
      cluster = await startCluster()
    }, 120_000)
    afterAll(() => cluster?.stop())
    for (const algorithm of ALGORITHMS) {
      it(`${algorithm}, 5 runs`, async () => {
        for (let run = 0; run < 5; run++) {
          const ports = cluster.nodes.map((n) => n.port)
          expect(await burst('cluster', ports, algorithm, run)).toEqual({ admitted: 100, failed: 0 })
        }
      })
    }
  })
})
