import { describe, expect, test } from 'vitest'
import { createMetrics } from './metrics.js'

describe('the breaker gauge of (rule, tier)', () => {
  const gauge = async (metrics: ReturnType<typeof createMetrics>) =>
    (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('edgelimit_breaker_state{'))

  test('follows the newest limiter made for it; once forgotten, the limiters that had it change nothing', async () => {
    let now = 1_000
    const metrics = createMetrics({ dashboard: { now: () => now } })
    const retired = metrics.limiterEvents('api', '')
    retired({ type: 'breaker', state: 'open' })
    expect(await gauge(metrics)).toEqual(['edgelimit_breaker_state{rule="api",tier=""} 2'])
    // A reload changed the rule: a new limiter, closed; the old one's late events are not its state.
    now = 2_000
    const current = metrics.limiterEvents('api', '')
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
})
