import type { AlgorithmSpec, ConsistencyMode, StoreErrorMode } from 'edgelimit'
import type { ClientKeyOptions, HeaderStandard } from '../library.js'

/** What a policy file means, once validated: plain data, every default filled in. */
export interface GatewayConfig {
  readonly version: 1
  /** Absent: `serve` needs `--upstream`, or starts the built-in demo origin. */
  readonly upstream: UpstreamConfig | undefined
  /** The limits clients are held to (Node's server timeouts, the body size). */
  readonly clients: ClientsConfig
  readonly store: StoreConfig
  readonly identity: ClientKeyOptions
  readonly headers: readonly HeaderStandard[]
  readonly rules: readonly RuleConfig[]
  readonly admin: { readonly token: string | undefined }
}

export interface UpstreamConfig {
  readonly url: string
  /** Until the upstream's response headers arrive (else 504). */
  readonly timeoutMs: number
  readonly connectTimeoutMs: number
  /**
   * Once the answer's head is in: how long its body may go without a byte moving, the upstream
   * sending none (undici's body timeout) or the client reading none; then it is cut off.
   */
  readonly bodyTimeoutMs: number
  /** Keep-alive connections per upstream. */
  readonly connections: number
  /** Send the client's Host instead of the upstream's. */
  readonly preserveHost: boolean
}

export interface ClientsConfig {
  /** From a request's first byte until its headers are complete (else 408). */
  readonly headersTimeoutMs: number
  /** From a request's first byte until its body is complete (else 408). */
  readonly requestTimeoutMs: number
  /** How long an idle keep-alive connection stays open. */
  readonly keepAliveTimeoutMs: number
  /** Bytes a request body may have (else 413); `undefined`: no limit. */
  readonly maxBodySize: number | undefined
  /** How long a WebSocket tunnel stays open without a byte either way. */
  readonly websocketIdleTimeoutMs: number
}

export type StoreConfig =
  | { readonly type: 'memory'; readonly maxKeys: number }
  | { readonly type: 'redis'; readonly url: string; readonly prefix: string }
  | { readonly type: 'redis-cluster'; readonly nodes: readonly string[]; readonly prefix: string }
  | {
      readonly type: 'upstash'
      readonly url: string
      readonly token: string
      readonly prefix: string
      /** How long one REST request may take before it is aborted (a store error). */
      readonly timeoutMs: number
    }

/** One part of a rule's key. */
export type KeyPart =
  | { readonly kind: 'ip' | 'route' | 'path' | 'method' | 'host' | 'global' }
  | { readonly kind: 'header' | 'query'; readonly name: string }

export interface MatchConfig {
  /** Lower-case host globs (`*.example.com`); any host when empty. */
  readonly hosts: readonly string[]
  /** Path globs (`/api/**`); any path when empty. */
  readonly paths: readonly string[]
  /** Upper-case methods; any method when empty. */
  readonly methods: readonly string[]
  /** Header name (lower-case) → value glob, `true` (present) or `false` (absent). */
  readonly headers: readonly (readonly [string, string | boolean])[]
}

/** One set of algorithm parameters: the rule's own, or one tier's. */
export interface PlanConfig {
  /** The tier's name; `''` for a rule without tiers. */
  readonly tier: string
  readonly algorithm: AlgorithmSpec
}

export interface TiersConfig {
  /** The tier is named by this request header (set it in a trusted layer in front). */
  readonly header: string | undefined
  /** The tier of a key value (the rule's key parts joined with `|`). Looked up before `header`. */
  readonly keys: ReadonlyMap<string, string>
  readonly default: string
}

export interface RuleConfig {
  readonly name: string
  readonly match: MatchConfig
  readonly key: readonly KeyPart[]
  readonly cost: number
  /** One plan, or one per tier. */
  readonly plans: readonly PlanConfig[]
  readonly tiers: TiersConfig | undefined
  readonly onStoreError: StoreErrorMode
  /** Store deadline; `false`: none. */
  readonly timeout: number | false
  readonly mode: 'enforce' | 'shadow'
  readonly enforce: number
  readonly consistency: ConsistencyMode
  readonly syncIntervalMs: number
}
