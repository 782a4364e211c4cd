import { createHash, createHmac } from 'node:crypto'
import { isIP } from 'node:net'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../errors.js'
import {
  type ClientIpInput,
  type ClientIpOptions,
  clientKey,
  hashKey,
  isTrustedPeer,
  partitionKeyBytes,
  resolveClientIp,
  validateClientKeyOptions,
} from './identity.js'
import {
  formatCidr,
  formatIp,
  inCidr,
  LOOPBACK,
  normalizeIp,
  type ParsedIp,
  PRIVATE,
  parseCidr,
  parseIp,
  subnetKey,
  subnetKeys,
} from './ip.js'

const req = (peer: string | undefined, headers: Record<string, string> = {}): ClientIpInput => ({
  peer,
  header: (name) => headers[name],
})

describe('parseIp', () => {
  it.each([
    ['1.2.3.4', 4, '1.2.3.4'],
    ['0.0.0.0', 4, '0.0.0.0'],
    ['255.255.255.255', 4, '255.255.255.255'],
    [' 10.0.0.1 ', 4, '10.0.0.1'],
    ['1.2.3.4:8080', 4, '1.2.3.4'],
    ['1.2.3.4:0', 4, '1.2.3.4'],
    ['1.2.3.4:65535', 4, '1.2.3.4'],
    ['::', 6, '::'],
    ['::1', 6, '::1'],
    ['1::', 6, '1::'],
    ['2001:DB8::1', 6, '2001:db8::1'],
    ['2001:db8:0:0:0:0:0:1', 6, '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:ff00:0042:8329', 6, '2001:db8::ff00:42:8329'],
    ['1:2:3:4:5:6:7:8', 6, '1:2:3:4:5:6:7:8'],
    ['1:2:3:4:5:6:7::', 6, '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', 6, '0:2:3:4:5:6:7:8'],
    ['fe80::1%eth0', 6, 'fe80::1'],
    ['fe80::1%25en0', 6, 'fe80::1'],
    ['[2001:db8::1]', 6, '2001:db8::1'],
    ['[2001:db8::1]:443', 6, '2001:db8::1'],
    ['[fe80::a%eth0]:80', 6, 'fe80::a'],
    ['::ffff:1.2.3.4', 4, '1.2.3.4'],
    ['::FFFF:1.2.3.4', 4, '1.2.3.4'],
    ['::ffff:0102:0304', 4, '1.2.3.4'],
    ['0:0:0:0:0:ffff:102:304', 4, '1.2.3.4'],
    ['[::ffff:192.0.2.1]:443', 4, '192.0.2.1'],
    ['::1.2.3.4', 6, '::102:304'],
    ['64:ff9b::192.0.2.33', 6, '64:ff9b::c000:221'],
    ['1:2:3:4:5:6:1.2.3.4', 6, '1:2:3:4:5:6:102:304'],
  ] as const)('accepts %j', (text, version, formatted) => {
    const ip = parseIp(text)
    expect(ip?.version).toBe(version)
    expect(ip && formatIp(ip)).toBe(formatted)
  })

  it.each([
    '',
    ' ',
    '1.2.3',
    '256.1.1.1',
    '1.2.3.4.5',
    '01.2.3.4',
    '1.2.3.-4',
    '1.2.3.4 5',
    '1.2.3.4:',
    '1.2.3.4:65536',
    '1.2.3.4:port',
    '1.2.3.4%eth0',
    '+1.2.3.4',
    '0x7f.0.0.1',
    '2130706433',
    ':::',
    ':',
    '::1::',
    '1::2::3',
    ':1::',
    '1:::2',
    'g::1',
    '12345::',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7:8::',
    '::1.2.3',
    '::1.2.3.4:5',
    '1.2.3.4::',
    '::ffff:256.1.1.1',
    '::1%',
    '::1%eth 0',
    '[1.2.3.4]',
    '[::1',
    '[::1]:',
    '[::1]:99999',
    '[::1]:_',
    '1.2.3.4:_a/b',
    '[::1]x',
    'localhost',
    'unknown',
    '_hidden',
    '1.2.3.4, 5.6.7.8',
    `1.2.3.4${' '.repeat(200)}`,
    '1:'.repeat(5000),
  ])('rejects %j', (text) => {
    expect(parseIp(text)).toBeUndefined()
  })

  it.each([
    ['::ffff:1.2.3.4', '1.2.3.4'],
    ['::ffff:0102:0304', '1.2.3.4'],
    ['2001:DB8::1', '2001:db8:0:0:0:0:0:1'],
    ['[2001:db8::1]:80', '2001:db8::0:1'],
    ['fe80::1%eth0', 'FE80:0:0:0:0:0:0:1'],
    ['192.0.2.43:_abc', '192.0.2.43'],
  ])('%j ≡ %j', (a, b) => {
    expect(normalizeIp(a)).toBe(normalizeIp(b))
    expect(normalizeIp(a)).toBeDefined()
  })

  it.each([
    ['1:0:0:1:0:0:0:1', '1:0:0:1::1'],
    ['1:0:0:2:0:0:3:4', '1::2:0:0:3:4'],
    ['1:0:2:3:4:5:6:7', '1:0:2:3:4:5:6:7'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['0:0:0:0:0:0:0:0', '::'],
  ])('formats %j as %j (RFC 5952)', (text, formatted) => {
    expect(normalizeIp(text)).toBe(formatted)
  })

  it('formats IPv4-mapped bytes given as IPv6 in dotted form', () => {
    const bytes = new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1])
    expect(formatIp({ version: 6, bytes })).toBe('::ffff:10.0.0.1')
  })

  it('agrees with node:net on the alphabet of addresses (property)', () => {
    const unit = fc.constantFrom(...'0123456789abcdefABCDEF:.'.split(''))
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 45 }), (text) => {
        const withPort = text.split(':').length === 2 && text.includes('.')
        fc.pre(!withPort)
        expect(parseIp(text) !== undefined).toBe(isIP(text) !== 0)
      }),
      { numRuns: 3000 },
    )
  })

  it('formats like the WHATWG URL serializer and round-trips (property)', () => {
    fc.assert(
      fc.property(fc.ipV6(), (text) => {
        const ip = parseIp(text)
        expect(ip).toBeDefined()
        if (ip === undefined) return
        const formatted = formatIp(ip)
        expect(parseIp(formatted)).toEqual(ip)
        if (ip.version === 6) expect(formatted).toBe(new URL(`http://[${text}]/`).hostname.slice(1, -1))
      }),
    )
    fc.assert(
      fc.property(fc.ipV4(), (text) => {
        expect(normalizeIp(text)).toBe(text)
      }),
    )
  })

  it('never throws, whatever the input (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.ipV6(), fc.ipV4Extended()),
        (text) => {
          parseIp(text)
          parseCidr(text)
          inCidr(text, text)
          subnetKey(text)
        },
      ),
    )
  })
})

describe('CIDR', () => {
  it.each([
    ['10.0.0.0/8', '10.0.0.0/8'],
    ['10.1.2.3/8', '10.0.0.0/8'],
    ['1.2.3.4', '1.2.3.4/32'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['2001:db8::/32', '2001:db8::/32'],
    ['2001:DB8:ffff::1/32', '2001:db8::/32'],
    ['::1', '::1/128'],
    ['::/0', '::/0'],
    ['::ffff:10.0.0.0/104', '10.0.0.0/8'],
    ['::ffff:0:0/96', '0.0.0.0/0'],
    ['fc00::/7', 'fc00::/7'],
    ['fe80::/10', 'fe80::/10'],
  ])('parses %j as %j', (text, formatted) => {
    const cidr = parseCidr(text)
    expect(cidr && formatCidr(cidr)).toBe(formatted)
  })

  it.each([
    '',
    '10.0.0.0/33',
    '2001:db8::/129',
    '10.0.0.0/',
    '10.0.0.0/8/8',
    '10.0.0.0/08',
    '10.0.0.0/-1',
    '10.0.0/8',
    '/8',
    '[::1]/128',
    'fe80::%eth0/10',
    '1.2.3.4:80',
    'any',
  ])('rejects %j', (text) => {
    expect(parseCidr(text)).toBeUndefined()
  })

  it.each([
    ['10.255.255.255', '10.0.0.0/8', true],
    ['11.0.0.0', '10.0.0.0/8', false],
    ['9.255.255.255', '10.0.0.0/8', false],
    ['172.31.255.255', '172.16.0.0/12', true],
    ['172.32.0.0', '172.16.0.0/12', false],
    ['1.2.3.4', '1.2.3.4', true],
    ['1.2.3.5', '1.2.3.4/32', false],
    ['8.8.8.8', '0.0.0.0/0', true],
    ['::ffff:10.1.1.1', '10.0.0.0/8', true],
    ['10.1.1.1', '::ffff:10.0.0.0/104', true],
    ['10.1.1.1', '::/0', false],
    ['::1', '0.0.0.0/0', false],
    ['2001:db8:ffff:ffff::1', '2001:db8::/32', true],
    ['2001:db9::', '2001:db8::/32', false],
    ['fdff::1', 'fc00::/7', true],
    ['fe00::1', 'fc00::/7', false],
    ['febf:ffff::1', 'fe80::/10', true],
    ['fec0::1', 'fe80::/10', false],
    ['2001:db8::1', '2001:db8::1/127', true],
    ['2001:db8::2', '2001:db8::1/127', false],
    ['garbage', '0.0.0.0/0', false],
    ['1.2.3.4', 'garbage', false],
  ])('%j in %j → %j', (ip, cidr, inside) => {
    expect(inCidr(ip, cidr)).toBe(inside)
  })

  it('presets parse and cover what they say', () => {
    for (const cidr of [...LOOPBACK, ...PRIVATE]) expect(parseCidr(cidr), cidr).toBeDefined()
    const any = (list: readonly string[], ip: string) => list.some((c) => inCidr(ip, c))
    expect(['127.0.0.1', '127.255.0.9', '::1'].every((ip) => any(LOOPBACK, ip))).toBe(true)
    const privates = ['10.1.1.1', '172.20.0.1', '192.168.1.1', '169.254.1.1', 'fd00::1', 'fe80::1']
    expect(privates.every((ip) => any(PRIVATE, ip))).toBe(true)
    expect(['8.8.8.8', '2001:db8::1', '::2'].some((ip) => any([...LOOPBACK, ...PRIVATE], ip))).toBe(false)
    expect(Object.isFrozen(PRIVATE)).toBe(true)
  })
})

describe('subnetKey', () => {
  it.each([
    ['203.0.113.5', {}, '203.0.113.5'],
    ['203.0.113.5', { ipv4Prefix: 24 }, '203.0.113.0/24'],
    ['203.0.113.5', { ipv4Prefix: 0 }, '0.0.0.0/0'],
    ['::ffff:203.0.113.5', {}, '203.0.113.5'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', {}, '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', { ipv6Prefix: 48 }, '2001:db8:1::/48'],
    ['2001:db8:1:2::1', { ipv6Prefix: 56 }, '2001:db8:1::/56'],
    ['2001:db8:1:2::1', { ipv6Prefix: 128 }, '2001:db8:1:2::1'],
    ['2001:db8:1:2::1', { ipv6Prefix: 0 }, '::/0'],
    ['2001:db8:1:2ff::1', { ipv6Prefix: 60 }, '2001:db8:1:2f0::/60'],
  ])('%j with %j → %j', (ip, options, key) => {
    expect(subnetKey(ip, options)).toBe(key)
  })

  it('addresses rotating inside one /64 share a key; neighbouring /64s do not', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 4, maxLength: 4 }), (suffix) => {
        const ip = `2001:db8:abcd:12:${suffix.map((w) => w.toString(16)).join(':')}`
        expect(subnetKey(ip)).toBe('2001:db8:abcd:12::/64')
      }),
    )
    expect(subnetKey('2001:db8:abcd:13::1')).not.toBe(subnetKey('2001:db8:abcd:12::1'))
    expect(subnetKey('2001:db8:abcd:12::1')).toBe(subnetKey('2001:DB8:ABCD:0012:0:0:0:FFFF'))
  })

  it('gives one key per tier', () => {
    expect(subnetKeys('2001:db8:1:2::9', [64, 48])).toEqual(['2001:db8:1:2::/64', '2001:db8:1::/48'])
    expect(subnetKeys('2001:db8:1:3::9', [64, 48])).toEqual(['2001:db8:1:3::/64', '2001:db8:1::/48'])
    expect(subnetKeys('198.51.100.7', [64, 48])).toEqual(['198.51.100.7', '198.51.100.7'])
    expect(subnetKeys('198.51.100.7', [{ ipv4Prefix: 32 }, { ipv4Prefix: 24, ipv6Prefix: 48 }])).toEqual([
      '198.51.100.7',
      '198.51.100.0/24',
    ])
    expect(subnetKeys('nope', [64])).toBeUndefined()
  })

  it.each([
    { ipv6Prefix: 129 },
    { ipv6Prefix: -1 },
    { ipv6Prefix: 64.5 },
    { ipv4Prefix: 33 },
    { ipv4Prefix: Number.NaN },
  ])('rejects prefix %j with a ConfigError', (options) => {
    expect(() => subnetKey('1.2.3.4', options)).toThrow(ConfigError)
  })

  it('refuses what is not a prefix, SubnetOptions or an address with a code, never a default or a TypeError', () => {
    const issuesOf = (make: () => unknown) => {
      try {
        make()
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError)
        return (error as ConfigError).issues.map((i) => `${i.path} ${i.code}`)
      }
      return []
    }
    const ip = '2001:db8:1:2::9'
    expect(
      issuesOf(() => subnetKeys(ip, ['48' as never, { ipv6prefix: 48 } as never, null as never])),
    ).toEqual(['tiers[0] ERR_INTEGER', 'tiers[1].ipv6prefix ERR_UNKNOWN_OPTION', 'tiers[2] ERR_OBJECT'])
    expect(issuesOf(() => subnetKeys(ip, '64' as never))).toEqual(['tiers ERR_ARRAY'])
    expect(issuesOf(() => subnetKeys(5 as never, [64]))).toEqual(['ip ERR_STRING'])
    expect(issuesOf(() => subnetKey(ip, null as never))).toEqual(['options ERR_OBJECT'])
    // subnetKey takes a client's identity options as they are (the gateway passes its identity).
    const identity = { trustedProxies: ['10.0.0.0/8'], secret: 's', ipv6Prefix: 48 }
    expect(subnetKey(ip, identity)).toBe('2001:db8:1::/48')
    expect(issuesOf(() => subnetKey(5 as never))).toEqual(['ip ERR_STRING'])
    // Still: a string that does not parse is no subnet, not an error.
    expect(subnetKeys('nope', [64])).toBeUndefined()
    expect(subnetKey(parseIp(ip) as ParsedIp, { ipv6Prefix: 48 })).toBe('2001:db8:1::/48')
  })
})

describe('resolveClientIp', () => {
  const cidrs: ClientIpOptions = { trustedProxies: ['10.0.0.0/8', '2001:db8:ffff::/48'] }
  const cases: [
    string,
    ClientIpInput,
    ClientIpOptions,
    { ip: string | undefined; source: string; reason?: string },
  ][] = [
    // No trust configured: the peer is the client, whatever the headers say.
    [
      'no trust: forged XFF ignored',
      req('198.51.100.9', { 'x-forwarded-for': '1.1.1.1' }),
      {},
      { ip: '198.51.100.9', source: 'peer' },
    ],
    [
      'no trust: mapped peer normalised',
      req('::ffff:198.51.100.9'),
      {},
      { ip: '198.51.100.9', source: 'peer' },
    ],
    ['no trust: IPv6 peer', req('2001:DB8::7'), {}, { ip: '2001:db8::7', source: 'peer' }],
    [
      'no peer on edge',
      req(undefined, { 'x-forwarded-for': '1.1.1.1' }),
      {},
      { ip: undefined, source: 'peer', reason: 'missing' },
    ],
    ['empty peer', req(''), {}, { ip: undefined, source: 'peer', reason: 'missing' }],
    ['malformed peer', req('not-an-ip'), {}, { ip: undefined, source: 'peer', reason: 'malformed' }],
    [
      'empty trust list',
      req('198.51.100.9', { 'x-forwarded-for': '1.1.1.1' }),
      { trustedProxies: [] },
      { ip: '198.51.100.9', source: 'peer' },
    ],
    [
      'hop count 0',
      req('198.51.100.9', { 'x-forwarded-for': '1.1.1.1' }),
      { trustedProxies: 0 },
      { ip: '198.51.100.9', source: 'peer' },
    ],
    // Spoofing from an untrusted peer.
    [
      'untrusted peer forges XFF',
      req('198.51.100.9', { 'x-forwarded-for': '1.1.1.1, 10.0.0.1' }),
      cidrs,
      { ip: '198.51.100.9', source: 'peer' },
    ],
    [
      'untrusted peer forges CF-Connecting-IP',
      req('198.51.100.9', { 'cf-connecting-ip': '1.1.1.1' }),
      { ...cidrs, header: 'cf-connecting-ip' },
      { ip: '198.51.100.9', source: 'peer' },
    ],
    [
      'trust list but no peer',
      req(undefined, { 'x-forwarded-for': '1.1.1.1' }),
      cidrs,
      { ip: undefined, source: 'peer', reason: 'missing' },
    ],
    // Via trusted proxies.
    [
      'trusted peer, XFF client',
      req('10.0.0.2', { 'x-forwarded-for': '203.0.113.7' }),
      cidrs,
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'trusted mapped peer',
      req('::ffff:10.0.0.2', { 'x-forwarded-for': '203.0.113.7' }),
      cidrs,
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'trusted IPv6 peer',
      req('2001:db8:ffff:1::2', { 'x-forwarded-for': '2001:db8:1::5' }),
      cidrs,
      { ip: '2001:db8:1::5', source: 'header' },
    ],
    [
      'right-most untrusted, forged left part',
      req('10.0.0.2', { 'x-forwarded-for': '6.6.6.6, 1.1.1.1, 203.0.113.7, 10.1.1.1, 10.2.2.2' }),
      cidrs,
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'garbage left of the client is never read',
      req('10.0.0.2', { 'x-forwarded-for': 'garbage, 203.0.113.7' }),
      cidrs,
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'ports and brackets in XFF',
      req('10.0.0.2', { 'x-forwarded-for': '[2001:db8:1::5]:4711, 10.0.0.3:80' }),
      cidrs,
      { ip: '2001:db8:1::5', source: 'header' },
    ],
    [
      'empty XFF entries skipped',
      req('10.0.0.2', { 'x-forwarded-for': ' 203.0.113.7 ,, 10.0.0.3 ,' }),
      cidrs,
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'all hops trusted: left-most',
      req('10.0.0.2', { 'x-forwarded-for': '10.9.9.9, 10.0.0.3' }),
      cidrs,
      { ip: '10.9.9.9', source: 'header' },
    ],
    // No forwarding header: the proxy sent the request itself (its health check), as express's
    // `trust proxy` and nginx's realip module see it.
    ['trusted peer, no XFF', req('10.0.0.2'), cidrs, { ip: '10.0.0.2', source: 'peer' }],
    [
      'trusted peer, blank XFF',
      req('10.0.0.2', { 'x-forwarded-for': '  ' }),
      cidrs,
      { ip: '10.0.0.2', source: 'peer' },
    ],
    [
      'trusted mapped peer, no XFF',
      req(' ::ffff:10.0.0.2 ', { forwarded: 'for=203.0.113.7' }),
      cidrs,
      { ip: '10.0.0.2', source: 'peer' },
    ],
    [
      'trusted peer, only commas',
      req('10.0.0.2', { 'x-forwarded-for': ' , ,' }),
      cidrs,
      { ip: undefined, source: 'header', reason: 'malformed' },
    ],
    [
      'trusted peer, garbage where the client is',
      req('10.0.0.2', { 'x-forwarded-for': '203.0.113.7, bogus, 10.0.0.3' }),
      cidrs,
      { ip: undefined, source: 'header', reason: 'malformed' },
    ],
    [
      'trusted peer, CF-Connecting-IP',
      req('10.0.0.2', { 'cf-connecting-ip': '2001:db8:1::5' }),
      { ...cidrs, header: 'cf-connecting-ip' },
      { ip: '2001:db8:1::5', source: 'header' },
    ],
    [
      'header name is case-insensitive',
      req('10.0.0.2', { 'x-real-ip': '203.0.113.7' }),
      { ...cidrs, header: 'X-Real-IP' },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'single-value header with a list',
      req('10.0.0.2', { 'true-client-ip': '1.1.1.1, 2.2.2.2' }),
      { ...cidrs, header: 'true-client-ip' },
      { ip: undefined, source: 'header', reason: 'malformed' },
    ],
    [
      'single-value header missing',
      req('10.0.0.2', {}),
      { ...cidrs, header: 'fastly-client-ip' },
      { ip: '10.0.0.2', source: 'peer' },
    ],
    // Hop counts: the Nth address from the right, the peer being the first proxy.
    [
      '1 hop',
      req('198.51.100.1', { 'x-forwarded-for': '6.6.6.6, 203.0.113.7' }),
      { trustedProxies: 1 },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      '2 hops',
      req('198.51.100.1', { 'x-forwarded-for': '6.6.6.6, 203.0.113.7, 198.51.100.2' }),
      { trustedProxies: 2 },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      '2 hops, short chain: left-most',
      req('198.51.100.1', { 'x-forwarded-for': '203.0.113.7' }),
      { trustedProxies: 2 },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'hops, no peer needed',
      req(undefined, { 'x-forwarded-for': '203.0.113.7' }),
      { trustedProxies: 1 },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'hops, garbage at the client position',
      req('198.51.100.1', { 'x-forwarded-for': 'unknown, 198.51.100.2' }),
      { trustedProxies: 2 },
      { ip: undefined, source: 'header', reason: 'malformed' },
    ],
    [
      'hops, header missing: the first proxy itself',
      req('198.51.100.1'),
      { trustedProxies: 1 },
      { ip: '198.51.100.1', source: 'peer' },
    ],
    [
      'hops, header and peer missing',
      req(undefined),
      { trustedProxies: 2 },
      { ip: undefined, source: 'peer', reason: 'missing' },
    ],
    [
      'hops, header missing, malformed peer',
      req('proxy.internal'),
      { trustedProxies: 1 },
      { ip: undefined, source: 'peer', reason: 'malformed' },
    ],
    // Platform-set headers.
    [
      'Cloudflare Workers',
      req(undefined, { 'cf-connecting-ip': '203.0.113.7' }),
      { header: 'cf-connecting-ip', trustPlatform: true },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'Vercel Edge',
      req(undefined, { 'x-forwarded-for': '203.0.113.7' }),
      { header: 'x-forwarded-for', trustPlatform: true },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'platform appends: right-most',
      req(undefined, { 'x-forwarded-for': '6.6.6.6, 203.0.113.7' }),
      { trustPlatform: true },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'platform plus own proxies',
      req(undefined, { 'x-forwarded-for': '6.6.6.6, 203.0.113.7, 10.0.0.3' }),
      { ...cidrs, trustPlatform: true },
      { ip: '203.0.113.7', source: 'header' },
    ],
    [
      'platform header missing',
      req(undefined),
      { header: 'cf-connecting-ip', trustPlatform: true },
      { ip: undefined, source: 'peer', reason: 'missing' },
    ],
    [
      'platform header missing, peer known',
      req('2001:db8::9'),
      { header: 'cf-connecting-ip', trustPlatform: true },
      { ip: '2001:db8::9', source: 'peer' },
    ],
  ]

  it.each(cases)('%s', (_, input, options, expected) => {
    expect(resolveClientIp(input, options)).toEqual(expected)
  })

  const fwd = { ...cidrs, header: 'forwarded' } as const
  it.each([
    ['for=203.0.113.7', '203.0.113.7'],
    ['For="203.0.113.7:4711"', '203.0.113.7'],
    ['for="[2001:db8:1::5]:4711";proto=https', '2001:db8:1::5'],
    ['for="[2001:db8:1::5]"', '2001:db8:1::5'],
    ['for=6.6.6.6, for=203.0.113.7;by=10.0.0.3, for=10.0.0.4', '203.0.113.7'],
    ['for=6.6.6.6;host="a,b;c", for=203.0.113.7', '203.0.113.7'],
    ['proto=https; for=203.0.113.7 ;by=_proxy', '203.0.113.7'],
    ['for="\\"quoted,junk\\"", for=203.0.113.7', '203.0.113.7'],
    ['for=unknown, for=203.0.113.7', '203.0.113.7'],
    ['for=203.0.113.7, for=unknown', undefined],
    ['for=203.0.113.7, for=_hidden', undefined],
    ['for=203.0.113.7, for="_obf:_port"', undefined],
    // An obfuscated port (RFC 7239 §6.3: `_` and letters, digits, `.`, `_`, `-`) hides the port only.
    ['for="203.0.113.7:_abc"', '203.0.113.7'],
    ['for="[2001:db8:1::5]:_x.y-z_9"', '2001:db8:1::5'],
    ['for=203.0.113.7, for="10.0.0.4:_p"', '203.0.113.7'],
    ['for=203.0.113.7, proto=https', undefined],
    ['for=1.1.1.1;for=203.0.113.7', undefined],
    ['for=203.0.113.7"', undefined],
    ['for="203.0.113.7', undefined],
    ['for=10.9.9.9, for=10.0.0.3', '10.9.9.9'],
    // A client's unclosed quote must not swallow the element its proxy appended.
    ['for=198.18.0.1;x=", for=203.0.113.7', '203.0.113.7'],
    ['for="198.18.0.1, for=203.0.113.7', '203.0.113.7'],
    ['for=198.18.0.1;x="\\, for=203.0.113.7', '203.0.113.7'],
    ['for=198.18.0.1;x=", for="[2001:db8:1::5]"', '2001:db8:1::5'],
    ['for=203.0.113.7, for=10.9.9.9;x="', undefined],
  ])('Forwarded: %s → %j', (value, ip) => {
    const result = resolveClientIp(req('10.0.0.2', { forwarded: value }), fwd)
    expect(result.ip).toBe(ip)
    expect(result.source).toBe('header')
    if (ip === undefined) expect(result.reason).toBe('malformed')
  })

  it('Forwarded with a hop count', () => {
    const input = req(undefined, { forwarded: 'for=6.6.6.6, for="[2001:db8::5]", for=unknown' })
    expect(resolveClientIp(input, { header: 'forwarded', trustedProxies: 2 }).ip).toBe('2001:db8::5')
  })

  it('never throws, whatever the peer and headers (property)', () => {
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.ipV4(),
      fc.ipV6(),
      fc.constant(undefined),
    )
    const chain = fc.array(fc.oneof(fc.string(), fc.ipV4(), fc.ipV6(), fc.constant('for="[::1]:80"')), {
      maxLength: 6,
    })
    const options = fc.constantFrom<ClientIpOptions>(
      {},
      cidrs,
      { ...cidrs, header: 'forwarded' },
      { ...cidrs, header: 'cf-connecting-ip' },
      { trustedProxies: 2 },
      { trustedProxies: 1, header: 'forwarded' },
      { trustPlatform: true },
    )
    fc.assert(
      fc.property(text, chain, options, (peer, hops, opts) => {
        const joined = hops.join(', ')
        const input = req(peer, { 'x-forwarded-for': joined, forwarded: joined, 'cf-connecting-ip': joined })
        const result = resolveClientIp(input, opts)
        if (result.ip !== undefined) expect(normalizeIp(result.ip)).toBe(result.ip)
        else expect(result.reason).toBeDefined()
      }),
      { numRuns: 500 },
    )
  })

  it('whatever a client prepends to the chain, the address its trusted proxy appends wins (property)', () => {
    const piece = fc.oneof(
      fc.constantFrom(...'"\\,;=[]: '.split(''), 'for', 'For=', 'x=', 'unknown', '10.0.0.5'),
      fc.constantFrom('198.18.0.1', '[2001:db8::66]', '2001:db8::66', '_hidden'),
      fc.string({ maxLength: 3 }),
    )
    const prefix = fc.array(piece, { maxLength: 12 }).map((p) => p.join(''))
    const real = fc.oneof(fc.constantFrom('203.0.113.7', '2001:db8:1::5'), fc.ipV4(), fc.ipV6())
    const options = fc.constantFrom<ClientIpOptions>(cidrs, { trustedProxies: 1 })
    fc.assert(
      fc.property(prefix, real, options, fc.boolean(), (sent, client, opts, forwarded) => {
        const ip = parseIp(client)
        fc.pre(ip !== undefined && !inCidr(ip, '10.0.0.0/8') && !inCidr(ip, '2001:db8:ffff::/48'))
        // What the proxy appends: Forwarded quotes an IPv6 node (RFC 7239 §6), X-Forwarded-For does not.
        const element = forwarded ? `for=${client.includes(':') ? `"[${client}]"` : client}` : client
        const value = sent === '' ? element : `${sent}, ${element}`
        const header = forwarded ? 'forwarded' : 'x-forwarded-for'
        const result = resolveClientIp(req('10.0.0.2', { [header]: value }), { ...opts, header })
        expect(result.ip).toBe(formatIp(ip as NonNullable<typeof ip>))
      }),
      { numRuns: 3000 },
    )
  })

  it('an untrusted peer is always keyed by itself (property)', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.string(), (peer, forged) => {
        fc.pre(!inCidr(peer, '10.0.0.0/8'))
        const input = req(peer, { 'x-forwarded-for': forged, forwarded: forged })
        expect(resolveClientIp(input, cidrs)).toEqual({ ip: peer, source: 'peer' })
        expect(resolveClientIp(input, { ...cidrs, header: 'forwarded' })).toEqual({
          ip: peer,
          source: 'peer',
        })
      }),
    )
  })
})

describe('isTrustedPeer', () => {
  it("agrees with resolveClientIp on whether a peer's headers are believed (property)", () => {
    const options: ClientIpOptions[] = [
      {},
      { trustedProxies: ['10.0.0.0/8', '2001:db8:ffff::/48'] },
      { trustedProxies: 0 },
      { trustedProxies: 2 },
      { header: 'cf-connecting-ip', trustPlatform: true },
    ]
    const peer = fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.constantFrom('10.1.2.3', ' 10.0.0.1 ', '::ffff:10.9.9.9', '2001:db8:ffff::1', '', 'junk'),
      fc.constant(undefined),
    )
    fc.assert(
      fc.property(peer, fc.constantFrom(...options), (p, o) => {
        // A peer is trusted exactly when a header it sends can name the client.
        const input = req(p, { 'x-forwarded-for': '203.0.113.77', 'cf-connecting-ip': '203.0.113.77' })
        expect(isTrustedPeer(p, o)).toBe(resolveClientIp(input, o).ip === '203.0.113.77')
      }),
    )
  })
})

describe('options validation', () => {
  it('reports every problem with its path', () => {
    const options = {
      trustedProxies: ['10.0.0.0/8', '10.0.0.0/33', 'nope'],
      header: 'x forwarded',
      trustPlatform: 'yes',
      ipv6Prefix: 129,
      ipv4Prefix: -1,
      secret: '',
      fallback: 7,
    }
    const issues = validateClientKeyOptions(options, 'identity')
    expect(issues.map((i) => [i.path, i.code])).toEqual([
      ['identity.trustedProxies[1]', 'ERR_CIDR'],
      ['identity.trustedProxies[2]', 'ERR_CIDR'],
      ['identity.header', 'ERR_HEADER'],
      ['identity.trustPlatform', 'ERR_BOOLEAN'],
      ['identity.ipv6Prefix', 'ERR_INTEGER'],
      ['identity.ipv4Prefix', 'ERR_INTEGER'],
      ['identity.secret', 'ERR_STRING'],
      ['identity.fallback', 'ERR_STRING'],
    ])
    expect(issues[0]?.message).toBe(
      'expected a CIDR like "10.0.0.0/8" or "2001:db8::/32", or an address, got "10.0.0.0/33" (string)',
    )
    expect(validateClientKeyOptions({ trustedProxies: -1 }).map((i) => i.path)).toEqual(['trustedProxies'])
    expect(validateClientKeyOptions(null).map((i) => i.code)).toEqual(['ERR_OBJECT'])
    expect(
      validateClientKeyOptions({ trustedProxies: [...PRIVATE], header: 'forwarded', secret: 's' }),
    ).toEqual([])
  })

  it('takes one CIDR as a string, and names the option when it is not one', () => {
    const options = { trustedProxies: '10.0.0.0/8' }
    expect(validateClientKeyOptions(options)).toEqual([])
    const forged = { 'x-forwarded-for': '203.0.113.7' }
    expect(resolveClientIp(req('10.1.2.3', forged), options).ip).toBe('203.0.113.7')
    expect(resolveClientIp(req('192.0.2.9', forged), options).ip).toBe('192.0.2.9')
    expect(validateClientKeyOptions({ trustedProxies: '10.0.0.0/8, 192.168.0.0/16' }, 'identity')).toEqual([
      {
        path: 'identity.trustedProxies',
        code: 'ERR_CIDR',
        message:
          'expected a CIDR like "10.0.0.0/8" or "2001:db8::/32", or an address, got "10.0.0.0/8, 192.168.0.0/16" (string)',
      },
    ])
    // Anything else that is not a list is read as a hop count.
    expect(validateClientKeyOptions({ trustedProxies: true }).map((i) => [i.path, i.code])).toEqual([
      ['trustedProxies', 'ERR_INTEGER'],
    ])
  })

  it('resolveClientIp and clientKey throw a ConfigError for invalid options', async () => {
    expect(() => resolveClientIp(req('1.2.3.4'), { trustedProxies: ['10.0.0.0/33'] })).toThrow(ConfigError)
    await expect(clientKey(req('1.2.3.4'), { ipv6Prefix: 200 })).rejects.toThrow(ConfigError)
  })
})

describe('hashKey', () => {
  it.each([
    ['203.0.113.5', 'secret'],
    ['2001:db8:1:2::/64', 'a much longer secret with ünïcödé ✓'],
    ['', 'k'],
    ['unknown-client', 'x'.repeat(200)],
  ])('HMAC-SHA-256 of %j matches node:crypto', async (value, secret) => {
    const expected = createHmac('sha256', secret).update(value, 'utf8').digest('base64url')
    expect(await hashKey(value, secret)).toBe(expected)
    expect(expected).toHaveLength(43)
    const bytes = await partitionKeyBytes(value, secret)
    expect(bytes).toBeInstanceOf(Uint8Array)
    expect([...bytes]).toEqual([
      ...createHmac('sha256', secret).update(value, 'utf8').digest().subarray(0, 16),
    ])
  })

  it('RFC 4231 test case 2', async () => {
    const hex = '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843'
    const data = 'what do ya want for nothing?'
    expect(await hashKey(data, 'Jefe')).toBe(Buffer.from(hex, 'hex').toString('base64url'))
    expect(Buffer.from(await partitionKeyBytes(data, 'Jefe')).toString('hex')).toBe(hex.slice(0, 32))
  })

  it('without a secret is plain SHA-256', async () => {
    expect(await hashKey('203.0.113.5')).toBe(createHash('sha256').update('203.0.113.5').digest('base64url'))
    expect([...(await partitionKeyBytes('x'))]).toEqual([
      ...createHash('sha256').update('x').digest().subarray(0, 16),
    ])
  })

  it('matches node:crypto for arbitrary values and secrets (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), fc.string({ minLength: 1 }), async (value, secret) => {
        expect(await hashKey(value, secret)).toBe(
          createHmac('sha256', secret).update(value).digest('base64url'),
        )
      }),
      { numRuns: 200 },
    )
  })

  it('rejects an empty secret', async () => {
    await expect(hashKey('x', '')).rejects.toThrow(ConfigError)
    await expect(partitionKeyBytes('x', '')).rejects.toThrow(ConfigError)
  })
})

describe('clientKey', () => {
  const hmac = (v: string) => createHmac('sha256', 's3cret').update(v).digest('base64url')
  const options = { trustedProxies: ['10.0.0.0/8'], secret: 's3cret' }

  it('hashes the /64 of an IPv6 client', async () => {
    const a = await clientKey(req('10.0.0.2', { 'x-forwarded-for': '2001:db8:1:2::aaaa' }), options)
    const b = await clientKey(req('10.0.0.2', { 'x-forwarded-for': '2001:db8:1:2:ffff::1' }), options)
    expect(a).toEqual({ key: hmac('2001:db8:1:2::/64'), ip: '2001:db8:1:2::aaaa', fallback: false })
    expect(b.key).toBe(a.key)
    const c = await clientKey(req('10.0.0.2', { 'x-forwarded-for': '2001:db8:1:3::1' }), options)
    expect(c.key).not.toBe(a.key)
  })

  it('honours ipv4Prefix and ipv6Prefix', async () => {
    const v4 = await clientKey(req('203.0.113.5'), { ...options, ipv4Prefix: 24 })
    expect(v4.key).toBe(hmac('203.0.113.0/24'))
    const v6 = await clientKey(req('2001:db8:1:2::1'), { ...options, ipv6Prefix: 48 })
    expect(v6.key).toBe(hmac('2001:db8:1::/48'))
  })

  it('a forged header from an untrusted peer is keyed by the peer', async () => {
    const forged = await clientKey(req('198.51.100.9', { 'x-forwarded-for': '1.1.1.1' }), options)
    expect(forged).toEqual({ key: hmac('198.51.100.9'), ip: '198.51.100.9', fallback: false })
  })

  it('falls back, flagged, when no address resolves', async () => {
    expect(await clientKey(req(undefined), options)).toEqual({
      key: 'unknown-client',
      fallback: true,
      reason: 'missing',
    })
    // A trusted proxy's own request (no forwarding header) has an address: the proxy's.
    expect(await clientKey(req('10.0.0.2'), options)).toEqual({
      key: hmac('10.0.0.2'),
      ip: '10.0.0.2',
      fallback: false,
    })
    const bad = await clientKey(req('10.0.0.2', { 'x-forwarded-for': 'junk' }), {
      ...options,
      fallback: 'anon',
    })
    expect(bad).toEqual({ key: 'anon', fallback: true, reason: 'malformed' })
  })

  it('without a secret uses SHA-256', async () => {
    const { key } = await clientKey(req('203.0.113.5'))
    expect(key).toBe(createHash('sha256').update('203.0.113.5').digest('base64url'))
  })
})
