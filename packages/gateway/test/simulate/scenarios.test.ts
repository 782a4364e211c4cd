import { describe, expect, test } from 'vitest'
import {
  type AlgorithmResult,
  defaultContestants,
  SCENARIOS,
  type Scenario,
  type SimulationResult,
  scenarioByName,
  simulate,
} from '../../src/simulate/index.js'

// Every built-in scenario through every algorithm, once (deterministic: seed 1).
const results = new Map<string, SimulationResult>(
  SCENARIOS.map((s) => {
    const trace = s.build()
    return [s.name, simulate(trace, defaultContestants(trace.limit, trace.windowMs))]
  }),
)

function algo(scenario: string, id: string): AlgorithmResult {
  const a = results.get(scenario)?.algorithms.find((x) => x.id === id)
  if (a === undefined) throw new Error(`${scenario}/${id} missing`)
  return a
}

const summary = (scenario: string) =>
  Object.fromEntries(
    (results.get(scenario)?.algorithms ?? []).map((a) => [a.id, [a.admitted, a.denied, a.maxInSpan.count]]),
  )

describe('every scenario', () => {
  test.each(SCENARIOS.map((s) => s.name))(
    '%s: the sliding log never exceeds the limit in any window span',
    (name) => {
      const log = algo(name, 'sliding-log')
      expect(log.maxInSpan.count).toBeLessThanOrEqual(log.limit)
      expect([log.falseBlocks, log.misses]).toEqual([0, 0])
    },
  )

  test.each(SCENARIOS.map((s) => s.name))(
    '%s: every algorithm decides every request, on the same traffic',
    (name) => {
      const r = results.get(name) as SimulationResult
      for (const a of r.algorithms) {
        expect(a.admitted + a.denied).toBe(r.requests)
        expect(a.timeline.admitted.reduce((x, y) => x + y, 0)).toBe(a.admitted)
        expect(a.timeline.denied.reduce((x, y) => x + y, 0)).toBe(a.denied)
      }
      expect(r.offered.reduce((x, y) => x + y, 0)).toBe(r.requests)
    },
  )

  test.each(SCENARIOS.map((s) => s.name))(
    '%s: size() tells about how many requests build() makes (within a tenth), whatever the limit and window',
    (name) => {
      const s = scenarioByName(name) as Scenario
      for (const options of [
        {},
        { limit: 20, windowMs: 10_000 },
        { limit: 300 },
        { limit: 7, windowMs: 3_600_000 },
        { limit: 50, windowMs: 1000 },
      ]) {
        const built = s.build(options).n
        expect(Math.abs(s.size(options) - built) / built, JSON.stringify(options)).toBeLessThan(0.1)
      }
    },
  )

  test('a scenario is the same traffic for the same seed, and other traffic for another', () => {
    const s = scenarioByName('bursty')
    const [a, b, c] = [s?.build({ seed: 1 }), s?.build({ seed: 1 }), s?.build({ seed: 2 })]
    expect(a?.n).toBe(b?.n)
    expect(a?.t).toEqual(b?.t)
    expect(c?.n).not.toBe(a?.n)
  })
})

describe('headline numbers', () => {
  test('steady: clients under the limit are never blocked; a client at 2× gets the limit rate', () => {
    expect(results.get('steady')?.requests).toBe(10_000)
    for (const a of results.get('steady')?.algorithms ?? []) {
      expect(a.byGroup.steady).toEqual({ admitted: 8000, denied: 0 })
    }
    // 100 per minute over 10 minutes; bucket algorithms add their initial burst.
    expect(algo('steady', 'fixed-window').byGroup.heavy?.admitted).toBe(1000)
    expect(algo('steady', 'sliding-log').byGroup.heavy?.admitted).toBe(1000)
    expect(algo('steady', 'sliding-window').byGroup.heavy?.admitted).toBe(1000)
    expect(algo('steady', 'token-bucket').byGroup.heavy?.admitted).toBe(1099)
    expect(algo('steady', 'gcra').byGroup.heavy?.admitted).toBe(1099)
    // A full bucket then its refill: up to 2L − 1 in one window span (the documented GCRA/token-bucket burst).
    expect(algo('steady', 'token-bucket').maxInSpan.count).toBe(199)
    expect(algo('steady', 'fixed-window').firstBlockMs).toBe(30_000)
  })

  test('bursty page loads: bucket algorithms admit the bursts that window algorithms cut', () => {
    expect(summary('bursty')).toEqual({
      'fixed-window': [43_980, 8203, 200],
      'sliding-log': [38_218, 13_965, 100],
      'sliding-window': [39_582, 12_601, 146],
      'token-bucket': [49_162, 3021, 199],
      'leaky-police': [49_162, 3021, 199],
      'leaky-shape': [49_207, 2976, 100],
      gcra: [49_162, 3021, 199],
    })
  })

  test('boundary burst: the fixed window admits 2× the limit around a boundary, the sliding log exactly the limit', () => {
    const fixed = algo('boundary-burst', 'fixed-window')
    expect(fixed.maxInSpan.count).toBe(200)
    expect(fixed.maxInSpan.key).toBe('203.0.113.66')
    expect(fixed.byGroup.attacker).toEqual({ admitted: 800, denied: 0 })
    expect(fixed.misses).toBe(400)
    expect(algo('boundary-burst', 'sliding-log').byGroup.attacker).toEqual({ admitted: 400, denied: 400 })
    expect(algo('boundary-burst', 'sliding-log').maxInSpan.count).toBe(100)
    // The counter's weighted estimate lets a little over the limit through: 102, not 200.
    expect(algo('boundary-burst', 'sliding-window').maxInSpan.count).toBe(102)
    for (const a of results.get('boundary-burst')?.algorithms ?? []) {
      expect(a.byGroup.legit).toEqual({ admitted: 1500, denied: 0 })
      expect(a.falseBlocks).toBe(0)
    }
  })

  test('credential stuffing at rollovers: the fixed window lets twice the attempts through, real users pass', () => {
    const fixed = algo('credential-stuffing', 'fixed-window')
    const log = algo('credential-stuffing', 'sliding-log')
    expect(fixed.byGroup.attacker?.admitted).toBe(800)
    expect(log.byGroup.attacker?.admitted).toBe(400)
    expect(fixed.maxInSpan.count).toBe(2 * fixed.limit)
    expect(fixed.firstBlockMs).toBeUndefined()
    expect(algo('credential-stuffing', 'token-bucket').byGroup.attacker?.admitted).toBe(400)
    expect(algo('credential-stuffing', 'gcra').byGroup.attacker?.admitted).toBe(400)
    expect(algo('credential-stuffing', 'sliding-window').byGroup.attacker?.admitted).toBe(480)
    for (const a of results.get('credential-stuffing')?.algorithms ?? []) {
      expect(a.byGroup.users).toEqual({ admitted: 96, denied: 0 })
    }
  })

  test('botnet of 10,000 IPs: per-IP limits see nothing to block', () => {
    const r = results.get('botnet') as SimulationResult
    expect(r.clients).toBe(10_020)
    expect(r.requests).toBe(151_926)
    for (const a of r.algorithms) {
      expect(a.denied).toBe(0)
      expect(a.maxInSpan.count).toBeLessThan(a.limit / 3)
    }
  })

  test('thundering herd: every algorithm cuts the reconnect storm; buckets recover sooner', () => {
    expect(summary('thundering-herd')).toEqual({
      'fixed-window': [110_000, 24_387, 110],
      'sliding-log': [109_739, 24_648, 100],
      'sliding-window': [109_999, 24_388, 101],
      'token-bucket': [125_773, 8614, 133],
      'leaky-police': [125_773, 8614, 133],
      'leaky-shape': [126_273, 8114, 100],
      gcra: [125_773, 8614, 133],
    })
    expect(algo('thundering-herd', 'sliding-log').firstBlockMs).toBeGreaterThanOrEqual(100_000)
  })

  test('shaping delays instead of denying: the leaky bucket in shape mode holds requests up to a window', () => {
    const shape = algo('boundary-burst', 'leaky-shape')
    expect(shape.delay.max).toBeGreaterThan(0)
    expect(shape.delay.max).toBeLessThanOrEqual(60_000)
    expect(shape.maxInSpan.count).toBeLessThanOrEqual(100)
  })
})
