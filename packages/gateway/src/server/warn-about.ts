import type { Logger } from 'pino'
import type { GatewayConfig } from '../config/types.js'

/** Warns about a policy that is valid but unsafe: client keys hashed without a secret. */
export function warnAbout(config: GatewayConfig, log: Logger): void {
  if (
    config.identity.secret === undefined &&
    config.rules.some((r) => r.key.some((p) => p.kind !== 'global'))
  ) {
    log.warn(
      'identity.secret is not set: client keys are hashed without a secret (set it from the environment)',
    )
  }
}
