/**
 * `edgelimit/http`: the runtime-neutral HTTP building blocks every adapter is made of — client
 * identity (trusted proxies, IPv6 subnet grouping, hashed keys), the standard header fields and
 * the problem+json answers. For your own framework glue, or to key a limiter yourself.
 *
 * @example
 * import { clientKey, LOOPBACK } from 'edgelimit/http'
 * const { key } = await clientKey({ peer: '::ffff:203.0.113.5', header: () => null }, { trustedProxies: LOOPBACK })
 */

export {
  ceilSeconds,
  type HeaderOptions,
  type HeaderStandard,
  type QuotaPolicy,
  quotaPolicy,
  rateLimitHeaders,
} from './http/headers.js'
export {
  type ClientIpHeader,
  type ClientIpInput,
  type ClientIpOptions,
  type ClientIpResult,
  type ClientKey,
  type ClientKeyOptions,
  clientKey,
  hashKey,
  isTrustedPeer,
  partitionKeyBytes,
  resolveClientIp,
  validateClientKeyOptions,
} from './http/identity.js'
export {
  type Cidr,
  inCidr,
  LOOPBACK,
  normalizeIp,
  type ParsedIp,
  PRIVATE,
  parseCidr,
  parseIp,
  type SubnetOptions,
  subnetKey,
  subnetKeys,
} from './http/ip.js'
export { pathGlob, routePath } from './http/path.js'
export { PROBLEM_TYPES, type ProblemDetails, problemFor } from './http/problem.js'
export {
  type CostOption,
  createRateLimit,
  type HttpAnswer,
  type HttpRateLimit,
  type HttpRequest,
  type HttpVerdict,
  type KeyFunction,
  type RateLimitOptions,
  type RouteRule,
} from './http/rate-limit.js'
