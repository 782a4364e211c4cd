import { EdgelimitError } from '../../errors.js'
import type { BoundRules, RuleVerdict, Store, StoreRule } from '../types.js'
import { type ScriptClient, toScriptClient } from './clients.js'
import { compileScript } from './script.js'

/** Options of the Redis store. */
export interface RedisStoreOptions {
  /**
   * An ioredis `Redis` or `Cluster`, a node-redis client or cluster, or an `@upstash/redis` client.
   * Clients are optional peer dependencies: install the one you use.
   */
  client: unknown
  /** Prepended to every key: `<prefix>:<rule>:{<key>}`. @default 'edgelimit' */
  prefix?: string
  /**
   * Whose clock decides: `'server'` uses Redis `TIME` inside the script (no skew between edge
   * locations); `'client'` passes the limiter's clock (manual clocks in tests, managed Redis that
   * forbids `TIME` in scripts). @default 'server'
   */
  clock?: 'server' | 'client'
}

const REASONS = [undefined, 'limit-exceeded', 'cost-exceeds-limit'] as const

/**
 * A store in Redis: every decision is one `EVALSHA` of one script that evaluates all of a
 * limiter's rules for a key atomically (all-or-nothing), with a TTL on every write. Keys are
 * `<prefix>:<rule>:{<key>}`: one hash tag per client key, so a client's rules share a Cluster slot
 * and clients spread across the cluster. A script missing on the server (restart, failover,
 * `SCRIPT FLUSH`) is sent once with `EVAL`, which loads it on that node; any other error is an error.
 *
 * @example
 * import Redis from 'ioredis'
 * import { redisStore } from 'edgelimit/redis'
 * const limiter = createLimiter({ rules, store: redisStore({ client: new Redis() }) })
 */
export function redisStore(options: RedisStoreOptions): Store {
  const client: ScriptClient = toScriptClient(options?.client)
  const prefix = options.prefix ?? 'edgelimit'
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new TypeError(`Expected \`prefix\` to be a string without braces, got \`${String(prefix)}\``)
  }
  const clock = options.clock ?? 'server'
  if (clock !== 'server' && clock !== 'client') {
    throw new TypeError(`Expected \`clock\` to be 'server' or 'client', got \`${String(clock)}\``)
  }
  return { name: 'redis', bind: (rules) => bindRules(client, prefix, clock === 'client', rules) }
}

function bindRules(
  client: ScriptClient,
  prefix: string,
  clientClock: boolean,
  rules: readonly StoreRule[],
): BoundRules {
  for (const rule of rules) {
    // A brace in a rule name would move the hash tag and split a client's keys across slots.
    if (/[{}]/.test(rule.name)) {
      throw new EdgelimitError(
        'ERR_EDGELIMIT_CONFIG',
        `Rule name "${rule.name}" cannot contain braces on Redis`,
      )
    }
  }
  const script = compileScript(rules.map((r) => r.policy))
  const heads = rules.map((r) => `${prefix}:${r.name}:{`)
  let sha: string | undefined
  let hashing: Promise<string> | undefined
  // After a flush or failover every call in flight meets NOSCRIPT: one of them reloads the script.
  let reloading: Promise<unknown> | undefined

  const keysOf = (key: string) => {
    const tag = escapeTag(key)
    return heads.map((h) => `${h}${tag}}`)
  }

  async function run(keys: string[], args: string[]): Promise<unknown> {
    if (sha === undefined) {
      hashing ??= sha1(script.text)
      sha = await hashing
    }
    try {
      return await client.evalsha(sha, keys, args)
    } catch (error) {
      if (!isNoScript(error)) throw error
      if (reloading !== undefined) {
        await reloading.catch(() => {})
        return client.evalsha(sha, keys, args)
      }
      const loaded = client.eval(script.text, keys, args)
      reloading = loaded.finally(() => {
        reloading = undefined
      })
      return loaded
    }
  }

  return {
    async evaluate(key, cost, now, options) {
      const args = [
        clientClock ? String(now) : '',
        String(cost),
        shadowFlags(options?.shadow ?? 0, rules.length),
        options?.force === true ? '1' : '0',
        ...script.params,
      ]
      return decode(await run(keysOf(key), args), rules.length)
    },
    async reset(key) {
      await client.del(keysOf(key))
    },
  }
}

/** The shadow bitmask as one character per rule, as main.lua reads it. */
function shadowFlags(mask: number, count: number): string {
  if (mask === 0) return ''
  let flags = ''
  for (let i = 0; i < count; i++) flags += (mask & (1 << i)) === 0 ? '0' : '1'
  return flags
}

/** A client key inside `{…}`: `}` and `%` escaped so the tag is always the whole key. */
function escapeTag(key: string): string {
  return /[%}]/.test(key) ? key.replace(/%/g, '%25').replace(/}/g, '%7D') : key
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && /NOSCRIPT/.test(error.message)
}

function decode(raw: unknown, count: number): RuleVerdict[] {
  if (!Array.isArray(raw) || raw.length !== count * 6) {
    throw new EdgelimitError(
      'ERR_EDGELIMIT_STORE',
      `Unexpected reply from the rate-limit script: ${JSON.stringify(raw)}`,
    )
  }
  const n = raw as number[]
  const out: RuleVerdict[] = []
  for (let i = 0; i < count; i++) {
    const o = i * 6
    // Integer replies arrive as numbers (strings from some REST bridges): Number() is a no-op then.
    const retry = Number(n[o + 3])
    out.push({
      allowed: Number(n[o]) === 1,
      remaining: Number(n[o + 1]),
      resetAfterMs: Number(n[o + 2]),
      retryAfterMs: retry < 0 ? Number.POSITIVE_INFINITY : retry,
      delayMs: Number(n[o + 4]),
      reason: REASONS[Number(n[o + 5])],
    })
  }
  return out
}

/** Hex SHA-1 of the script via Web Crypto (Node 20+, Workers, Deno, Bun). */
async function sha1(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-1', new TextEncoder().encode(text))
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('')
}
