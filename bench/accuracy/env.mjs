// What a benchmark result needs to be read later: machine, load, build and source revision.
// Shared by bench/accuracy.mjs and bench/replay.mjs.

import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const RESULTS = path.join(ROOT, 'bench', 'results')

export function git(args) {
  try {
    return execFileSync('git', args, {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trimEnd()
  } catch {
    return null
  }
}

export function version(pkg) {
  try {
    return JSON.parse(readFileSync(path.join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version
  } catch {
    return null
  }
}

/** A short hash of the built library's JavaScript (names and contents): which build was measured. */
export function buildHash(dir = path.dirname(fileURLToPath(import.meta.resolve('edgelimit')))) {
  const hash = createHash('sha256')
  for (const file of readdirSync(dir, { recursive: true }).map(String).sort()) {
    if (!file.endsWith('.js')) continue
    hash.update(file)
    hash.update(readFileSync(path.join(dir, file)))
  }
  return hash.digest('hex').slice(0, 16)
}

/** How the benchmark was started: the npm script when run through npm, and the direct command. */
export function commandLine(script, argv) {
  const direct = ['node', script, ...argv].join(' ')
  const event = process.env.npm_lifecycle_event
  if (event === undefined) return { command: direct, direct }
  return { command: `npm run ${event}`, npmScript: process.env.npm_lifecycle_script ?? null, direct }
}

const round2 = (l) => Number(l.toFixed(2))

/** Machine and revision facts, with the load average before (`loadBefore`) and now. */
export function environment({ script, argv, started, loadBefore, dirtyPaths, buildDir }) {
  const cpus = os.cpus()
  return {
    date: new Date().toISOString().slice(0, 10),
    ...commandLine(script, argv),
    node: process.version,
    v8: process.versions.v8,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpu: { model: cpus[0]?.model ?? 'unknown', cores: cpus.length },
    totalMemoryBytes: os.totalmem(),
    edgelimitBuild: buildHash(buildDir),
    git: {
      head: git(['rev-parse', 'HEAD']),
      dirty: (git(['status', '--porcelain', '--', ...dirtyPaths]) ?? '').split('\n').filter(Boolean),
    },
    versions: { edgelimit: version('edgelimit') },
    durationSeconds: Math.round((Date.now() - started) / 1000),
    loadAverage: { before: loadBefore.map(round2), after: os.loadavg().map(round2) },
  }
}

/** The header lines every result page starts with. */
export function headerLines(meta) {
  const dirty =
    meta.git.dirty.length === 0
      ? ''
      : ` with uncommitted changes in ${meta.git.dirty.map((d) => `\`${d.slice(3)}\``).join(', ')}`
  return [
    `- Command: \`${meta.command}\`${meta.npmScript ? ` (runs \`${meta.npmScript}\`)` : ''}`,
    `- Node ${meta.node} (V8 ${meta.v8}), ${meta.platform}`,
    `- CPU: ${meta.cpu.model} × ${meta.cpu.cores}`,
    `- Date: ${meta.date}; ${meta.durationSeconds} s in all; load average (1/5/15 min) ${meta.loadAverage.before.join(' / ')} before, ${meta.loadAverage.after.join(' / ')} after`,
    `- edgelimit ${meta.versions.edgelimit} at ${meta.git.head}${dirty}; build hash ${meta.edgelimitBuild} (sha-256 of dist/*.js)`,
  ]
}

/** A markdown table. */
export function mdTable(header, rows, align) {
  const sep = align.map((a) => (a === 'r' ? '---:' : ':---'))
  return [header, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n')
}
