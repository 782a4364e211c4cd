import { Readable } from 'node:stream'

/** Options of the synthetic access log. */
export interface LogOptions {
  lines: number
  /** Distinct client IPs. @default 50_000 */
  clients?: number
  /** Epoch ms of the first line. @default 2026-01-01T00:00:00Z */
  startMs?: number
  /** Mean requests per second. @default 400 */
  rate?: number
  /** Lines are stamped up to this much earlier than they are written (requests end out of order). @default 20_000 */
  jitterMs?: number
  /** Every `malformedEvery` lines, one malformed line (0: none). @default 0 */
  malformedEvery?: number
  seed?: number
  /** `clf` (Combined Log Format) or `json` (one object per line, ISO times). @default 'clf' */
  format?: 'clf' | 'json'
  /**
   * How requests spread over clients. `zipf`: the client of rank k sends in proportion to
   * k^-0.7, which matches the real sample log (its top 1 % of clients send 25 % of requests, its
   * top 10 % about half). `uniform`: every client alike, 2 % of traffic from 5 hot ones — the
   * worst case for caches. @default 'zipf'
   */
  distribution?: 'zipf' | 'uniform'
}

/** Cumulative Zipf weights (exponent `s`) over `n` ranks, normalised to 1. */
function zipf(n: number, s: number): Float64Array {
  const cdf = new Float64Array(n)
  let total = 0
  for (let k = 0; k < n; k++) {
    total += (k + 1) ** -s
    cdf[k] = total
  }
  for (let k = 0; k < n; k++) cdf[k] = (cdf[k] as number) / total
  return cdf
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const PATHS = [
  '/',
  '/index.html',
  '/api/search?q=rate',
  '/api/items/42',
  '/static/app.js',
  '/static/site.css',
  '/login',
  '/feed.xml',
]
const AGENTS = [
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
  'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
  'curl/8.5.0',
]

/** `10/Oct/2000:13:55:36 +0000`. */
export function clfTime(ms: number): string {
  const d = new Date(ms)
  const p = (n: number) => String(n).padStart(2, '0')
  return `${p(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`
}

/**
 * A deterministic Combined Log Format access log, generated on the fly in chunks (constant
 * memory): clients as skewed as in the real sample log (a few above any sane per-IP limit, a
 * long tail of quiet ones), logins, lines slightly out of time order, optionally malformed lines.
 */
export function accessLog(options: LogOptions): Readable {
  const clients = options.clients ?? 50_000
  const start = options.startMs ?? Date.UTC(2026, 0, 1)
  const gap = 1000 / (options.rate ?? 400)
  const jitter = options.jitterMs ?? 20_000
  const every = options.malformedEvery ?? 0
  let seed = (options.seed ?? 7) >>> 0
  const rand = () => {
    seed = (seed + 0x6d2b79f5) >>> 0
    let t = seed
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const ips = Array.from({ length: clients }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
  const cdf = options.distribution === 'uniform' ? undefined : zipf(clients, 0.7)
  const client = (): string => {
    if (cdf === undefined) {
      // 2 % of traffic from 5 hot clients, the rest spread evenly.
      const r = rand()
      return (r < 0.02 ? ips[Math.floor(r * 250)] : ips[Math.floor(rand() * clients)]) as string
    }
    const u = rand()
    let lo = 0
    let hi = clients - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if ((cdf[mid] as number) < u) lo = mid + 1
      else hi = mid
    }
    // Ranks are spread over the address range, not in address order.
    return ips[(lo * 7919) % clients] as string
  }
  let i = 0
  let lastSecond = -1
  let stamp = ''
  return new Readable({
    read() {
      const parts: string[] = []
      for (let n = 0; n < 512 && i < options.lines; n++, i++) {
        if (every > 0 && i % every === every - 1) {
          parts.push(
            i % (2 * every) === every - 1
              ? 'garbage line without any structure\n'
              : `10.0.0.1 - - [99/Foo/2026:00:00:00 +0000] "GET / HTTP/1.1" 200 1\n`,
          )
          continue
        }
        const ms = start + i * gap - rand() * jitter
        const second = Math.floor(ms / 1000)
        if (second !== lastSecond) {
          lastSecond = second
          stamp = clfTime(second * 1000)
        }
        const ip = client()
        const path = PATHS[Math.floor(rand() * PATHS.length)] as string
        const method = path === '/login' ? 'POST' : 'GET'
        const agent = AGENTS[Math.floor(rand() * AGENTS.length)] as string
        const size = Math.floor(rand() * 50_000)
        parts.push(
          options.format === 'json'
            ? `{"time":"${new Date(second * 1000).toISOString()}","remote_addr":"${ip}","request":"${method} ${path} HTTP/1.1","status":200,"bytes":${size},"user_agent":${JSON.stringify(agent)}}\n`
            : `${ip} - - [${stamp}] "${method} ${path} HTTP/1.1" 200 ${size} "-" "${agent}"\n`,
        )
      }
      this.push(parts.length === 0 ? null : parts.join(''))
    },
  })
}
