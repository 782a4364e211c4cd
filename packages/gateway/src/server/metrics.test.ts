import { describe, expect, test } from 'vitest'
import { createMetrics } from './metrics.js'

describe('the breaker gauge of (rule, tier)', () => {
  const gauge = async (metrics: ReturnType<typeof createMetrics>) =>
    (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('edgelimit_breaker_state{'))

  test('follows the newest limiter made for it; once forgotten, the limiters that had it change nothing', async () => {
    let now = 1_000
    const metrics = createMetrics({ dashboard: { now: () => now } })
    const retired = metrics.limiterEvents('api', '', 1_000)
    retired({ type: 'breaker', state: 'open' })
    expect(await gauge(metrics)).toEqual(['edgelimit_breaker_state{rule="api",tier=""} 2'])
    // A reload changed the rule: a new limiter, closed; the old one's late events are not its state.
    now = 2_000
    const current = metrics.limiterEvents('api', '', 1_000)
    retired({ type: 'breaker', state: 'half-open' })
    expect(await gauge(metrics)).toEqual(['edgelimit_breaker_state{rule="api",tier=""} 0'])
    expect(metrics.dashboard.breakers()).toEqual([{ rule: 'api', tier: '', state: 'closed', since: 2_000 }])
    current({ type: 'breaker', state: 'open' })
    expect(await gauge(metrics)).toEqual(['edgelimit_breaker_state{rule="api",tier=""} 2'])
    // The rule removed: gauge and dashboard entry go, and stay gone.
    metrics.forgetBreaker('api', '')
    current({ type: 'breaker', state: 'closed' })
    retired({ type: 'breaker', state: 'open' })
    expect(await gauge(metrics)).toEqual([])
    expect(metrics.dashboard.breakers()).toEqual([])
  })

  test('an open breaker is reported half-open (1) once its openMs has passed, with no event: the next call probes', async () => {
    let now = 10_000
    const metrics = createMetrics({ dashboard: { now: () => now } })
    const events = metrics.limiterEvents('login', '', 1_000)
    const tiered = metrics.limiterEvents('api', 'free', 5_000)
    events({ type: 'breaker', state: 'open' })
    tiered({ type: 'breaker', state: 'open' })
    now = 10_999
    expect(await gauge(metrics)).toEqual([
      'edgelimit_breaker_state{rule="login",tier=""} 2',
      'edgelimit_breaker_state{rule="api",tier="free"} 2',
    ])
    expect(metrics.dashboard.breakers().map((b) => b.state)).toEqual(['open', 'open'])
    // No call since: the breaker itself still says open, but the next call would be let through.
    now = 11_000
    expect(await gauge(metrics)).toEqual([
      'edgelimit_breaker_state{rule="login",tier=""} 1',
      'edgelimit_breaker_state{rule="api",tier="free"} 2',
    ])
    expect(metrics.dashboard.breakers()).toEqual([
      { rule: 'login', tier: '', state: 'half-open', since: 11_000 },
      { rule: 'api', tier: 'free', state: 'open', since: 10_000 },
    ])
    now = 60_000
    expect(await gauge(metrics)).toEqual([
      'edgelimit_breaker_state{rule="login",tier=""} 1',
      'edgelimit_breaker_state{rule="api",tier="free"} 1',
    ])
    // The probe failed: open for another openMs from then.
    events({ type: 'breaker', state: 'half-open' })
    events({ type: 'breaker', state: 'open' })
    tiered({ type: 'breaker', state: 'half-open' })
    tiered({ type: 'breaker', state: 'closed' })
    expect(await gauge(metrics)).toEqual([
      'edgelimit_breaker_state{rule="login",tier=""} 2',
      'edgelimit_breaker_state{rule="api",tier="free"} 0',
    ])
    now = 61_000
    expect(await gauge(metrics)).toEqual([
      'edgelimit_breaker_state{rule="login",tier=""} 1',
      'edgelimit_breaker_state{rule="api",tier="free"} 0',
    ])
    expect(metrics.dashboard.breakers()).toEqual([
      { rule: 'login', tier: '', state: 'half-open', since: 61_000 },
      { rule: 'api', tier: 'free', state: 'closed', since: 60_000 },
    ])
  })
})
