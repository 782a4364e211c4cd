import { createHmac } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { compileKey, createClientResolver, createHasher } from './key.js'
import { MAX_KEY, memo } from './memo.js'
import type { RequestInfo } from './request.js'

const request = (headers: Record<string, string>, peer = '10.0.0.2'): RequestInfo => ({
  method: 'GET',
  path: '/',
  routePath: '/',
  query: '',
  host: 'example.test',
  header: (name) => headers[name],
  peer,
})
const hmac = (descriptor: string) => createHmac('sha256', 's3cret').update(descriptor).digest('base64url')
// A client's API key or X-Forwarded-For of ~15 KB (a header line may hold 16 KB).
const long = (i: number) => `${'k'.repeat(15_000)}${i}`

describe('memo', () => {
  test('holds keys up to MAX_KEY characters, at most `entries` of them; longer keys never', () => {
    const m = memo<number>(3)
    m.set('a'.repeat(MAX_KEY), 1)
    m.set('b'.repeat(MAX_KEY + 1), 2)
    expect([m.get('a'.repeat(MAX_KEY)), m.get('b'.repeat(MAX_KEY + 1)), m.size]).toEqual([1, undefined, 1])
    for (const k of ['c', 'd', 'e']) m.set(k, 0)
    expect(m.size).toBeLessThanOrEqual(3)
  })
})

describe('createHasher', () => {
  test('long descriptors are hashed each time, never held; short ones are cached', () => {
    const cache = memo<string>()
    const hasher = createHasher('s3cret', cache)
    for (let i = 0; i < 1000; i++) {
      const descriptor = `header:x-api-key=${long(i)}`
      expect(hasher.hash(descriptor)).toBe(hmac(descriptor))
    }
    expect(cache.size).toBe(0)
    // Stable: the same long descriptor, hashed again, has the same key.
    expect(hasher.hash(`header:x-api-key=${long(7)}`)).toBe(hmac(`header:x-api-key=${long(7)}`))
    expect(hasher.hash('ip=203.0.113.9')).toBe(hmac('ip=203.0.113.9'))
    expect(hasher.hash('ip=203.0.113.9')).toBe(hmac('ip=203.0.113.9'))
    expect(cache.size).toBe(1)
  })

  test('through compileKey: a flood of distinct long API keys leaves nothing behind', () => {
    const cache = memo<string>()
    const hasher = createHasher('s3cret', cache)
    const key = compileKey([{ kind: 'header', name: 'x-api-key' }], createClientResolver({}), hasher)
    const seen = new Set<string>()
    for (let i = 0; i < 1000; i++) {
      const k = key(request({ 'x-api-key': long(i) }), '*', {})
      expect(k).toEqual({ key: hmac(`header:x-api-key=${long(i)}`), raw: long(i) })
      seen.add(k.key)
    }
    expect([seen.size, cache.size]).toEqual([1000, 0])
    expect(key(request({ 'x-api-key': long(3) }), '*', {}).key).toBe(hmac(`header:x-api-key=${long(3)}`))
  })
})

describe('createClientResolver', () => {
  test('a long X-Forwarded-For is resolved each time, never held', () => {
    const cache = memo<string>()
    const clientOf = createClientResolver({ trustedProxies: ['10.0.0.0/8'] }, cache)
    for (let i = 0; i < 1000; i++) {
      const xff = `${'10.0.0.1, '.repeat(1500)}198.51.100.${i % 250}, 10.0.0.3`
      expect(clientOf(request({ 'x-forwarded-for': xff }), {})).toBe(`198.51.100.${i % 250}`)
    }
    expect(cache.size).toBe(0)
    expect(clientOf(request({ 'x-forwarded-for': '198.51.100.9' }), {})).toBe('198.51.100.9')
    expect(cache.size).toBe(1)
  })
})
