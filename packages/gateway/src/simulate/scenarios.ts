import { exponential, random, type Trace, traceBuilder } from './trace.js'

/** Parameters every scenario is built from. */
export interface ScenarioOptions {
  /** The limit the traffic is built around (an attacker who knows your limit). */
  limit?: number
  windowMs?: number
  /** @default 1 */
  seed?: number
}

/** A built-in scenario. */
export interface Scenario {
  readonly name: string
  readonly title: string
  /** Its default limit and window. */
  readonly limit: number
  readonly windowMs: number
  build(options?: ScenarioOptions): Trace
  /**
   * About how many requests `build` makes with these options (its expected count, without
   * building it): the traffic grows with the limit, and a large one would not fit in memory.
   */
  size(options?: ScenarioOptions): number
}

/**
 * The most requests `edgelimit simulate` builds for one scenario: about 1.5 GB, and from 25 s
 * (boundary-burst) to a few minutes (botnet, 10,000 keys) of simulation.
 */
export const MAX_SCENARIO_REQUESTS = 5_000_000

const MIN = 60_000

function scenario(
  name: string,
  title: string,
  limit: number,
  windowMs: number,
  durationMs: (w: number) => number,
  describe: (l: number, w: number) => string,
  size: (l: number, w: number) => number,
  fill: (
    b: ReturnType<typeof traceBuilder>,
    l: number,
    w: number,
    rand: () => number,
    duration: number,
  ) => void,
): Scenario {
  return {
    name,
    title,
    limit,
    windowMs,
    build(options = {}) {
      const l = options.limit ?? limit
      const w = options.windowMs ?? windowMs
      const rand = random(options.seed ?? 1)
      const b = traceBuilder()
      const duration = durationMs(w)
      fill(b, l, w, rand, duration)
      return b.build({ name, description: describe(l, w), limit: l, windowMs: w, durationMs: duration })
    },
    size: (options = {}) => Math.round(size(options.limit ?? limit, options.windowMs ?? windowMs)),
  }
}

/** Evenly spaced requests from `start` to `end` at `count` per `span`. */
function even(
  b: ReturnType<typeof traceBuilder>,
  client: number,
  start: number,
  end: number,
  period: number,
  path?: string,
  method?: string,
) {
  for (let t = start; t < end; t += period) b.add(t, client, path, method)
}

/** Requests spread evenly over `[start, start + span)`. */
function burst(
  b: ReturnType<typeof traceBuilder>,
  client: number,
  start: number,
  count: number,
  span: number,
  path?: string,
  method?: string,
) {
  for (let i = 0; i < count; i++) b.add(start + (i * span) / count, client, path, method)
}

const steady = scenario(
  'steady',
  'Steady traffic',
  100,
  MIN,
  (w) => 10 * w,
  (l, w) =>
    `10 clients at a steady 80 % of the limit (${Math.round(0.8 * l)} per ${w / 1000} s, evenly spaced) and one heavy client at 2×, for 10 windows.`,
  (l) => 10 * 8 * l + 20 * l,
  (b, l, w, rand, duration) => {
    for (let i = 0; i < 10; i++) {
      const period = w / (0.8 * l)
      even(b, b.client(`10.0.0.${i + 1}`, 'steady'), rand() * period, duration, period)
    }
    even(b, b.client('10.0.1.1', 'heavy'), 0, duration, w / (2 * l))
  },
)

const bursty = scenario(
  'bursty',
  'Bursty page loads',
  100,
  MIN,
  (w) => 10 * w,
  (l, w) =>
    `50 browsers loading pages: each page is a document and 20–60 assets within 1.5 s, then 5–40 s of reading; about ${Math.round(0.8 * l)} requests per ${w / 1000} s on average, in bursts.`,
  (l, w) => {
    // Pages per browser: from a start in the first 10 s, one every 1.5 s + 22.5 s (scaled) on average.
    const duration = 10 * w
    const cycle = 1500 + 22_500 * (w / MIN)
    const pages =
      duration >= 10_000
        ? (duration - 5000) / cycle + 0.5
        : (duration * duration) / 20_000 / cycle + (0.5 * duration) / 10_000
    return 50 * pages * (1 + 0.4 * l)
  },
  (b, l, w, rand, duration) => {
    const scale = l / 100
    for (let u = 0; u < 50; u++) {
      const client = b.client(`192.0.2.${u + 1}`, 'browsers')
      for (let t = rand() * 10_000; t < duration; ) {
        b.add(t, client, '/page')
        const assets = Math.round((20 + rand() * 40) * scale)
        for (let a = 0; a < assets; a++) b.add(t + 50 + rand() * 1450, client, '/asset')
        t += 1500 + (5_000 + rand() * 35_000) * (w / MIN)
      }
    }
  },
)

const boundaryBurst = scenario(
  'boundary-burst',
  'Boundary-burst attack',
  100,
  MIN,
  (w) => 10 * w,
  (l) =>
    `An attacker sends the whole limit (${l}) in the second before every other window boundary and again in the second after it; 5 legitimate clients send 30 % of the limit, evenly.`,
  (l) => 4 * 2 * l + 5 * 3 * l,
  (b, l, w, rand, duration) => {
    const attacker = b.client('203.0.113.66', 'attacker')
    const span = Math.min(1000, w / 4)
    for (let k = 2; k * w < duration; k += 2) {
      burst(b, attacker, k * w - span, l, span)
      burst(b, attacker, k * w, l, span)
    }
    for (let i = 0; i < 5; i++) {
      const period = w / (0.3 * l)
      even(b, b.client(`198.51.100.${i + 1}`, 'legit'), rand() * period, duration, period)
    }
  },
)

const credentialStuffing = scenario(
  'credential-stuffing',
  'Credential stuffing timed to window rollovers',
  5,
  MIN,
  (w) => 10 * w,
  (l) =>
    `20 attacking IPs each try ${l} passwords in the half second before every other window rollover of POST /login and ${l} more in the half second after; 50 real users log in 1–3 times (typos) at random.`,
  (l) => 20 * 4 * 2 * l + 50 * 2,
  (b, l, w, rand, duration) => {
    const span = Math.min(500, w / 8)
    for (let a = 0; a < 20; a++) {
      const ip = b.client(`185.220.101.${a + 1}`, 'attacker')
      for (let k = 2; k * w < duration; k += 2) {
        const jitter = rand() * 50
        burst(b, ip, k * w - span + jitter, l, span - 50, '/login', 'POST')
        burst(b, ip, k * w + jitter, l, span - 50, '/login', 'POST')
      }
    }
    for (let u = 0; u < 50; u++) {
      const user = b.client(`100.64.0.${u + 1}`, 'users')
      const start = rand() * (duration - 60_000)
      const tries = 1 + Math.floor(rand() * 3)
      for (let i = 0; i < tries; i++) b.add(start + i * (4000 + rand() * 8000), user, '/login', 'POST')
    }
  },
)

const botnet = scenario(
  'botnet',
  'Distributed botnet of 10,000 IPs',
  100,
  MIN,
  (w) => 3 * w,
  (l, w) =>
    `10,000 IPs each send ${Math.round(0.05 * l)} requests per ${w / 1000} s (Poisson), far below a per-IP limit, to /api/search for 3 windows: ${Math.round(500 * l).toLocaleString('en-US')} per window in all; 20 real clients send 30 % of the limit.`,
  (l) => 10_000 * 3 * 0.05 * l + 20 * 3 * 0.3 * l,
  (b, l, w, rand, duration) => {
    const mean = w / (0.05 * l)
    for (let i = 0; i < 10_000; i++) {
      const ip = b.client(`10.${(i >> 8) & 255}.${i & 255}.${1 + (i % 7)}`, 'botnet')
      for (let t = exponential(rand, mean); t < duration; t += exponential(rand, mean))
        b.add(t, ip, '/api/search')
    }
    for (let i = 0; i < 20; i++) {
      const period = w / (0.3 * l)
      even(b, b.client(`198.51.100.${i + 1}`, 'legit'), rand() * period, duration, period, '/api/search')
    }
  },
)

const thunderingHerd = scenario(
  'thundering-herd',
  'Thundering herd after a deploy',
  100,
  MIN,
  (w) => 5 * w,
  (l, w) =>
    `500 clients poll at 30 % of the limit; a deploy at ${Math.round((5 * w) / 3) / 1000} s drops every connection and each client reconnects within 1 s with ${Math.round(1.2 * l)} requests in 2 s (state reload and retries), then polls again.`,
  // Polls before the deploy, the reconnect, polls from about 2.5 s after it to the end.
  (l, w) => 500 * (0.5 * l + 1.2 * l + (Math.max(0, (10 * w) / 3 - 2500) * 0.3 * l) / w),
  (b, l, w, rand, duration) => {
    const deploy = Math.round((5 * w) / 3)
    const period = w / (0.3 * l)
    for (let c = 0; c < 500; c++) {
      const client = b.client(`172.16.${c >> 8}.${c & 255}`, 'clients')
      even(b, client, rand() * period, deploy, period)
      const back = deploy + rand() * 1000
      burst(b, client, back, Math.round(1.2 * l), 2000)
      even(b, client, back + 2000 + rand() * period, duration, period)
    }
  },
)

/** The built-in scenarios, in the order `simulate` runs them. */
export const SCENARIOS: readonly Scenario[] = [
  steady,
  bursty,
  boundaryBurst,
  credentialStuffing,
  botnet,
  thunderingHerd,
]

/** A scenario by name. */
export function scenarioByName(name: string): Scenario | undefined {
  return SCENARIOS.find((s) => s.name === name)
}
