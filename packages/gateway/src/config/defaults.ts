import { describe } from '../library.js'
import type { Checker } from './checker.js'
import type { Path } from './issues.js'
import { readKey } from './key.js'
import type { RuleConfig } from './types.js'

/** Settings a rule takes from `defaults` when it does not set them. */
export const DEFAULT_FIELDS = [
  'key',
  'cost',
  'onStoreError',
  'timeout',
  'mode',
  'enforce',
  'consistency',
  'syncInterval',
] as const

/** The settings of `defaults`, validated: those a rule takes from them when it sets none. */
export type Defaults = Pick<
  RuleConfig,
  'key' | 'cost' | 'onStoreError' | 'timeout' | 'mode' | 'enforce' | 'consistency' | 'syncIntervalMs'
>

export const BUILT_IN_DEFAULTS: Defaults = {
  key: [{ kind: 'ip' }],
  cost: 1,
  onStoreError: 'closed',
  timeout: 45,
  mode: 'enforce',
  enforce: 100,
  consistency: 'strict',
  syncIntervalMs: 250,
}

/** Validates `defaults` (or the settings of one rule over `base`). */
export function readDefaults(c: Checker, path: Path, o: Record<string, unknown>, base: Defaults): Defaults {
  const pick = <T>(name: string, read: (p: Path, v: unknown) => T | undefined, fallback: T): T => {
    if (o[name] === undefined) return fallback
    return read([...path, name], o[name]) ?? fallback
  }
  return {
    key: pick('key', (p, v) => readKey(c, p, v), base.key),
    cost: pick('cost', (p, v) => c.integer(p, v, 0, Number.MAX_SAFE_INTEGER), base.cost),
    onStoreError: pick(
      'onStoreError',
      (p, v) => c.choice(p, v, ['open', 'closed', 'local'] as const),
      base.onStoreError,
    ),
    timeout: pick('timeout', (p, v) => (v === false ? false : c.duration(p, v)), base.timeout),
    mode: pick('mode', (p, v) => c.choice(p, v, ['enforce', 'shadow'] as const), base.mode),
    enforce: pick(
      'enforce',
      (p, v) => {
        if (typeof v === 'number' && v >= 0 && v <= 100) return v
        c.add(p, 'ERR_PERCENT', `expected a percentage from 0 to 100, got ${describe(v)}`)
        return undefined
      },
      base.enforce,
    ),
    consistency: pick(
      'consistency',
      (p, v) => c.choice(p, v, ['strict', 'local', 'approximate'] as const),
      base.consistency,
    ),
    syncIntervalMs: pick('syncInterval', (p, v) => c.duration(p, v), base.syncIntervalMs),
  }
}
