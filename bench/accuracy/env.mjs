// What a benchmark result needs to be read later: machine, load, build and source revision.
// Shared by bench/accuracy.mjs and bench/replay.mjs.

import { dirtyText, runMeta } from '../lib/machine.mjs'

export { buildHash, commandLine, git, mdTable, RESULTS, ROOT, version } from '../lib/machine.mjs'

/** Machine and revision facts, with the load average before (`loadBefore`) and now. */
export function environment({ script, argv, started, loadBefore, dirtyPaths, buildDir }) {
  return runMeta({ script, argv, started, loadBefore, dirtyPaths, buildDir })
}

/** The header lines every result page starts with. */
export function headerLines(meta) {
  return [
    `- Command: \`${meta.command}\`${meta.npmScript ? ` (runs \`${meta.npmScript}\`)` : ''}`,
    `- Node ${meta.node} (V8 ${meta.v8}), ${meta.platform}`,
    `- CPU: ${meta.cpu.model} × ${meta.cpu.cores}`,
    `- Date: ${meta.date}; ${meta.durationSeconds} s in all; load average (1/5/15 min) ${meta.loadAverage.before.join(' / ')} before, ${meta.loadAverage.after.join(' / ')} after`,
    `- edgelimit ${meta.versions.edgelimit} at ${meta.git.head}${dirtyText(meta.git.dirty)}; build hash ${meta.edgelimitBuild} (sha-256 of dist/*.js)`,
  ]
}
