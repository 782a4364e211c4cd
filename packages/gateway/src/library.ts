/**
 * The library's HTTP building blocks the gateway shares with every adapter: header fields, the
 * problem+json answer, client-address resolution. `edgelimit` does not export them yet (its
 * adapters use them internally), so they are taken from its source here, in this one file, and
 * bundled into the CLI. When the library exports them (say as `edgelimit/http`), only this file
 * changes.
 */

export { bindingRule } from '../../edgelimit/src/decision.js'
export { describe } from '../../edgelimit/src/errors.js'
export {
  type HeaderStandard,
  type QuotaPolicy,
  quotaPolicy,
  rateLimitHeaders,
} from '../../edgelimit/src/http/headers.js'
export {
  type ClientKeyOptions,
  resolveClientIp,
  validateClientKeyOptions,
} from '../../edgelimit/src/http/identity.js'
export { subnetKey } from '../../edgelimit/src/http/ip.js'
export { PROBLEM_TYPES, problemFor } from '../../edgelimit/src/http/problem.js'
