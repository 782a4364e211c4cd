/**
 * What the gateway takes from the library beyond its public entry points: the HTTP building
 * blocks come from `edgelimit/http` (shared with every adapter); `bindingRule`, `describe`,
 * `enforcedFor`, `problemJson`, `sleep` and `within` are internal helpers not worth a public export, taken from the library's source in this one file.
 */

export {
  type ClientKeyOptions,
  type HeaderStandard,
  isTrustedPeer,
  PROBLEM_TYPES,
  pathGlob,
  problemFor,
  type QuotaPolicy,
  quotaPolicy,
  rateLimitHeaders,
  resolveClientIp,
  routePath,
  subnetKey,
  validateClientKeyOptions,
} from 'edgelimit/http'
export { sleep } from '../../edgelimit/src/adapters/shared.js'
export { bindingRule } from '../../edgelimit/src/decision.js'
export { describe } from '../../edgelimit/src/errors.js'
export { problemJson } from '../../edgelimit/src/http/problem.js'
export { within } from '../../edgelimit/src/resilience/deadline.js'
export { enforcedFor } from '../../edgelimit/src/resilience/rollout.js'
