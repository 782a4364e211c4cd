import { describe, expect, it } from 'vitest'
import { remember } from './remember.js'

describe('remember', () => {
  it('keeps at most `max` entries, dropping the oldest quarter at once when full', () => {
    const map = new Map<string, number>()
    for (let i = 0; i < 8; i++) remember(map, `k${i}`, i, 8)
    expect([...map.keys()]).toEqual(['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7'])
    // Full: one pass drops the two oldest (a quarter of 8), then the new key goes in.
    remember(map, 'k8', 8, 8)
    expect([...map.keys()]).toEqual(['k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8'])
    for (let i = 9; i < 1000; i++) {
      remember(map, `k${i}`, i, 8)
      expect(map.size).toBeLessThanOrEqual(8)
      // Always the newest keys, in the order they came.
      const keys = [...map.keys()]
      expect(keys).toEqual(keys.map((_, j) => `k${i - keys.length + 1 + j}`))
      expect(keys.length).toBeGreaterThanOrEqual(7)
    }
  })

  it('drops the least recently used first: a key set again moves to the newest end', () => {
    const map = new Map<string, number>()
    for (let i = 0; i < 4; i++) remember(map, `k${i}`, i, 4)
    // A use, as the callers record one: delete, then set again.
    map.delete('k0')
    remember(map, 'k0', 0, 4)
    remember(map, 'k4', 4, 4)
    expect([...map.keys()]).toEqual(['k2', 'k3', 'k0', 'k4'])
  })

  it('drops at least one entry, however small `max`', () => {
    for (const max of [1, 2, 3]) {
      const map = new Map<string, number>()
      for (let i = 0; i < 10; i++) remember(map, `k${i}`, i, max)
      expect([...map.keys()]).toEqual(Array.from({ length: max }, (_, j) => `k${10 - max + j}`))
    }
  })
})
