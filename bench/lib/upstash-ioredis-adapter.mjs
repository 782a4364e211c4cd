// A minimal @upstash/redis-shaped facade over an ioredis client, so that @upstash/ratelimit can be
// benchmarked against the same local Redis, over the same TCP client, as every other contestant.
//
// @upstash/ratelimit 2.0.8 (node_modules/@upstash/ratelimit/dist/index.mjs) talks to Redis only
// through `ctx.redis`. With a single-region `new Ratelimit({ redis, limiter, ephemeralCache: false,
// analytics: false })` (enableProtection and dynamicLimits off by default), `limit()` of
// fixedWindow / slidingWindow / tokenBucket calls exactly one of these, via its `safeEval`:
//
//   redis.evalsha(sha, keys, args)   → on an error whose text contains NOSCRIPT:
//   redis.eval(script, keys, args)
//
// where `keys` is an array of strings (the dynamic-limit key is '' when dynamicLimits is off) and
// `args` an array of numbers/strings. @upstash/redis sends these as EVALSHA/EVAL with
// `numkeys = keys.length`; ioredis takes them flat: evalsha(sha, numkeys, ...keys, ...args).
// Numbers are sent as their decimal text by both.
//
// Replies: the limit scripts return arrays of integers, which ioredis (RESP2 or RESP3) and
// @upstash/redis both hand back as arrays of JS numbers, so no reply conversion is needed on this
// path. (@upstash/redis additionally JSON-parses string replies — "automatic deserialization" — which
// these scripts never return.) `scriptLoad` is provided for completeness (ratelimit does not call it).
//
// The hot-key section of bench/redis.mjs runs the same `limit()` with `ephemeralCache: new Map()`:
// that cache lives in-process (identifier → reset time, checked before the script is called), so
// it needs nothing more from this adapter.
//
// Anything else @upstash/ratelimit can call (getRemaining/resetUsedTokens use evalsha/eval too;
// analytics, deny lists and dynamic limits use get/set/hset/multi/…) is NOT implemented and throws,
// so a benchmark can never silently take a path this adapter does not model.

/**
 * @param {import('ioredis').Redis} client an ioredis client
 * @returns an object with the subset of the @upstash/redis API that @upstash/ratelimit's
 *   single-region `limit()` uses
 */
export function upstashAdapter(client) {
  const unsupported = (name) => () => {
    throw new Error(`upstash-ioredis-adapter: ${name}() is not implemented (not used by limit())`)
  }
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
    scriptLoad: (script) => client.script('LOAD', script),
    get: unsupported('get'),
    set: unsupported('set'),
    hset: unsupported('hset'),
    multi: unsupported('multi'),
    pipeline: unsupported('pipeline'),
  }
}
