import { expect, test } from 'vitest'
import { clientTable, interner } from '../../src/replay/intern.js'

const bytes = (text: string) => Buffer.from(`>${text}<`)
const get = (t: { get(b: Buffer, s: number, e: number): string }, text: string) => {
  const b = bytes(text)
  return t.get(b, 1, b.length - 1)
}

test('the client table counts every address exactly while it grows, and returns one string per address', () => {
  const table = clientTable(100_000)
  const ips = Array.from({ length: 20_000 }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
  const first = new Map<string, string>()
  // Address i is seen (i % 7) + 1 times, interleaved, while the table grows from 16,384 slots.
  for (let round = 0; round < 7; round++) {
    for (const [i, ip] of ips.entries()) {
      if (i % 7 < round) continue
      const s = get(table, ip)
      expect(table.counted).toBe(true)
      if (round === 0) first.set(ip, s)
      else if (s !== first.get(ip)) throw new Error(`a second string for ${ip}`)
    }
  }
  const counts = table.counts()
  expect(counts.size).toBe(20_000)
  for (const [i, ip] of ips.entries())
    if (counts.get(ip) !== (i % 7) + 1) throw new Error(`${ip}: ${counts.get(ip)}`)
})

test('beyond its bound, new addresses are returned uncounted; held ones are still counted', () => {
  const table = clientTable(3)
  for (const ip of ['a', 'b', 'c']) {
    expect(get(table, ip)).toBe(ip)
    expect(table.counted).toBe(true)
  }
  expect(get(table, 'd')).toBe('d')
  expect(table.counted).toBe(false)
  expect(get(table, 'a')).toBe('a')
  expect(table.counted).toBe(true)
  expect(get(table, 'd')).toBe('d')
  expect(table.counted).toBe(false)
  expect([...table.counts()].sort()).toEqual([
    ['a', 2],
    ['b', 1],
    ['c', 1],
  ])
})

test('non-ASCII and over-long strings are decoded as UTF-8 and not counted', () => {
  const table = clientTable(10, 8)
  expect(get(table, 'hôte')).toBe('hôte')
  expect(table.counted).toBe(false)
  expect(get(table, 'a-very-long-host')).toBe('a-very-long-host')
  expect(table.counted).toBe(false)
  expect(table.counts().size).toBe(0)
})

test('the interner returns the same string for the same bytes, and the latest on a collision', () => {
  const cache = interner(1)
  const a = get(cache, '/index.html')
  expect(get(cache, '/index.html')).toBe(a)
  expect(get(cache, '/feed.xml')).toBe('/feed.xml')
  expect(get(cache, 'é')).toBe('é')
})
