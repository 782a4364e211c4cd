import { type AlgorithmSpec, algorithmSpec } from 'edgelimit'
import { describe } from '../library.js'
import type { Checker } from './checker.js'
import type { Path } from './issues.js'

export const ALGORITHMS = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-bucket',
  'gcra',
] as const
export type AlgorithmName = (typeof ALGORITHMS)[number]

/** The parameters each algorithm takes (the library's option names; `shape: true` = leaky `mode: 'shape'`). */
export const PARAMS: Readonly<Record<AlgorithmName, readonly string[]>> = {
  'fixed-window': ['limit', 'window'],
  'sliding-log': ['limit', 'window'],
  'sliding-window': ['limit', 'window'],
  'token-bucket': ['capacity', 'refillRate', 'refillInterval'],
  'leaky-bucket': ['capacity', 'leakRate', 'leakInterval', 'shape'],
  gcra: ['limit', 'period', 'burst'],
}
/** Every algorithm's parameters: the fields a rule or a plan may set besides its settings. */
export const ALL_PARAMS = [...new Set(Object.values(PARAMS).flat())]

/** Validates a rule's `algorithm`. */
export function readAlgorithm(c: Checker, path: Path, value: unknown): AlgorithmName | undefined {
  if ((ALGORITHMS as readonly unknown[]).includes(value)) return value as AlgorithmName
  c.add(
    [...path, 'algorithm'],
    'ERR_UNKNOWN_ALGORITHM',
    `expected one of ${ALGORITHMS.join(', ')}, got ${describe(value)}`,
  )
  return undefined
}

/** Reports parameters of other algorithms (unknown fields are reported by `fields`). */
export function checkParams(
  c: Checker,
  path: Path,
  o: Record<string, unknown>,
  algorithm: AlgorithmName,
): void {
  if (o.shape !== undefined && algorithm === 'leaky-bucket') c.boolean([...path, 'shape'], o.shape)
  for (const name of Object.keys(o)) {
    if (PARAMS[algorithm].includes(name) || !ALL_PARAMS.includes(name)) continue
    c.add(
      [...path, name],
      'ERR_PARAM',
      `"${name}" is not a parameter of ${algorithm} (it takes ${PARAMS[algorithm].join(', ')})`,
      'key',
    )
  }
}

/**
 * The library's spec for the algorithm's own parameters: another algorithm's was reported
 * (`ERR_PARAM`), and the library refuses a name it does not know.
 */
export function spec(algorithm: AlgorithmName, params: Record<string, unknown>): AlgorithmSpec {
  const options: Record<string, unknown> = Object.fromEntries(
    Object.entries(params).filter(([name]) => name !== 'shape' && PARAMS[algorithm].includes(name)),
  )
  if (algorithm === 'leaky-bucket') options.mode = params.shape === true ? 'shape' : 'police'
  return algorithmSpec({ algorithm, options })
}
