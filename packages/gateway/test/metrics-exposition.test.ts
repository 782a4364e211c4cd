// `/metrics` as Prometheus reads it: strict text exposition (0.0.4), across reloads that rename,
// remove and re-add rules, with the series an alert needs there before their first event.
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { farWindow } from '../../edgelimit/test/support/window.js'
import { type InProcess, rawRequest, startInProcess } from './support/gateway.js'
import { type Origin, startOrigin } from './support/origin.js'

/** One sample: its metric name, labels (unescaped) and value. */
interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

interface Family {
  readonly type: string
  readonly samples: Sample[]
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/

/** The labels of `{…}`: each `name="value"` with only `\\`, `\"` and `\n` escaped. */
function labelsOf(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {}
  let i = 0
  while (i < text.length) {
    const eq = text.indexOf('=', i)
    if (eq === -1) throw new Error(`a label without a value: ${line}`)
    const name = text.slice(i, eq)
    if (!LABEL.test(name) || name in labels) throw new Error(`label name ${name}: ${line}`)
    if (text[eq + 1] !== '"') throw new Error(`an unquoted label value: ${line}`)
    let value = ''
    let j = eq + 2
    for (; j < text.length && text[j] !== '"'; j++) {
      const c = text[j] as string
      if (c === '\n') throw new Error(`a raw newline in a label value: ${line}`)
      if (c !== '\\') {
        value += c
        continue
      }
      const next = text[++j]
      if (next === '\\') value += '\\'
      else if (next === '"') value += '"'
      else if (next === 'n') value += '\n'
      else throw new Error(`an escape \\${next} in a label value: ${line}`)
    }
    if (j >= text.length) throw new Error(`an unterminated label value: ${line}`)
    labels[name] = value
    i = j + 1
    if (text[i] === ',') i++
    else if (i < text.length) throw new Error(`labels not separated by a comma: ${line}`)
  }
  return labels
}

/**
 * Parses a scrape strictly: every family declared once (HELP and TYPE, before its samples), every
 * sample of the family declared last, no series twice, values that are numbers; histograms with
 * cumulative buckets ending in `+Inf`, whose count is `_count`.
 */
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>()
  const helped = new Set<string>()
  const series = new Set<string>()
  let current: string | undefined
  for (const line of text.split('\n')) {
    if (line === '') continue
    const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line)
    if (meta !== null) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string | undefined]
      if (!NAME.test(name)) throw new Error(`metric name ${name}`)
      if (kind === 'HELP') {
        if (helped.has(name)) throw new Error(`HELP twice for ${name}`)
        helped.add(name)
      } else {
        if (families.has(name)) throw new Error(`TYPE twice for ${name}`)
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest ?? ''))
          throw new Error(`TYPE ${rest} for ${name}`)
        families.set(name, { type: rest as string, samples: [] })
      }
      current = name
      continue
    }
    if (line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?$/.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string]
    const family = current === undefined ? undefined : families.get(current)
    const suffixes = family?.type === 'histogram' ? ['_bucket', '_sum', '_count'] : ['']
    if (family === undefined || !suffixes.some((s) => name === `${current}${s}`))
      throw new Error(`a sample outside its family: ${line}`)
    // As Go's ParseFloat reads it (Prometheus does): NaN and Inf in any case (prom-client writes `Nan`).
    const special = /^([+-]?)(inf|nan)$/i.exec(valueText)
    const value =
      special === null
        ? Number(valueText)
        : special[2]?.toLowerCase() === 'nan'
          ? Number.NaN
          : special[1] === '-'
            ? -Infinity
            : Infinity
    if (special === null && (valueText.trim() === '' || Number.isNaN(value)))
      throw new Error(`value ${valueText}: ${line}`)
    const labels = labelsOf(labelText ?? '', line)
    const id = `${name}${JSON.stringify(Object.entries(labels).sort())}`
    if (series.has(id)) throw new Error(`the same series twice: ${line}`)
    series.add(id)
    family.samples.push({ name, labels, value })
  }
  for (const [name, family] of families) {
    if (!helped.has(name)) throw new Error(`no HELP for ${name}`)
    if (family.type === 'histogram') checkHistogram(name, family.samples)
  }
  return families
}

function checkHistogram(name: string, samples: readonly Sample[]): void {
  const byLabels = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>()
  for (const s of samples) {
    const { le, ...rest } = s.labels
    const id = JSON.stringify(Object.entries(rest).sort())
    const h = byLabels.get(id) ?? { buckets: [] }
    byLabels.set(id, h)
    if (s.name.endsWith('_bucket')) {
      if (le === undefined) throw new Error(`${name}: a bucket without le`)
      h.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value])
    } else if (s.name.endsWith('_sum')) h.sum = s.value
    else h.count = s.value
  }
  for (const [id, h] of byLabels) {
    const bounds = h.buckets.map(([le]) => le)
    expect(bounds, `${name}${id}: buckets in order`).toEqual([...bounds].sort((a, b) => a - b))
    expect(bounds.at(-1), `${name}${id}: +Inf`).toBe(Infinity)
    const counts = h.buckets.map(([, n]) => n)
    for (let i = 1; i < counts.length; i++)
      expect(counts[i], `${name}${id}: cumulative`).toBeGreaterThanOrEqual(counts[i - 1] as number)
    expect(h.count, `${name}${id}: _count is the +Inf bucket`).toBe(counts.at(-1))
    expect(h.sum, `${name}${id}: _sum`).toBeGreaterThanOrEqual(0)
  }
}

/** The value of one series, or undefined when the scrape has none. */
function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}) {
  const want = JSON.stringify(labels)
  for (const family of families.values())
    for (const s of family.samples) if (s.name === name && JSON.stringify(s.labels) === want) return s.value
  return undefined
}

let origin: Origin
beforeAll(async () => {
  origin = await startOrigin()
})
afterAll(async () => {
  await origin?.close()
})

const WINDOW = farWindow()

describe('/metrics as Prometheus parses it', () => {
  let gw: InProcess
  // A gateway of its own for each test: each counts from its start.
  beforeEach(async () => {
    gw = await startInProcess(
      `
identity: { secret: test }
rules:
  - { name: login, match: { path: /login }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
  - { name: trial, match: { path: /trial }, algorithm: fixed-window, limit: 1, window: ${WINDOW}, mode: shadow }
`,
      { upstream: origin.url },
    )
  })
  afterEach(() => gw?.close())

  const scrape = async () => {
    const response = await fetch(`${gw.admin}/metrics`)
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
    return parseExposition(await response.text())
  }

  test('before any reload or store error, their series are there at 0: an alert on increase() sees the first one', async () => {
    const families = await scrape()
    for (const result of ['success', 'failure'])
      expect(sampleValue(families, 'edgelimit_config_reloads_total', { result }), result).toBe(0)
    for (const kind of ['error', 'timeout', 'breaker-open'])
      expect(sampleValue(families, 'edgelimit_store_errors_total', { kind }), kind).toBe(0)
    expect(sampleValue(families, 'edgelimit_config_last_reload_successful')).toBe(1)
    // Each rule's outcomes by its mode (as the dashboard lists them): the first denial is a rise.
    const decided = (rule: string, tier: string) =>
      families
        .get('edgelimit_decisions_total')
        ?.samples.filter((s) => s.labels.rule === rule && s.labels.tier === tier)
        .map((s) => `${s.labels.outcome} ${s.value}`)
    expect(decided('login', '')).toEqual(['allowed 0', 'denied 0'])
    expect(decided('trial', '')).toEqual(['allowed 0', 'shadow_denied 0'])
    expect(sampleValue(families, 'edgelimit_shadow_would_block_total', { rule: 'trial', tier: '' })).toBe(0)
    expect(sampleValue(families, 'edgelimit_shadow_would_block_total', { rule: 'login', tier: '' })).toBe(
      undefined,
    )
  })

  test('a reload puts the series of the rules and tiers it adds there at 0', async () => {
    writeFileSync(
      gw.file,
      `identity: { secret: test }
rules:
  - name: api
    match: { path: /api/** }
    algorithm: fixed-window
    window: ${WINDOW}
    enforce: 50
    tiers: { header: x-plan, default: free, plans: { free: { limit: 2 }, pro: { limit: 4 } } }
`,
    )
    expect((await gw.gateway.reload('test')).ok).toBe(true)
    const families = await scrape()
    for (const tier of ['free', 'pro']) {
      for (const outcome of ['allowed', 'denied', 'shadow_denied'])
        expect(sampleValue(families, 'edgelimit_decisions_total', { rule: 'api', tier, outcome })).toBe(0)
      expect(sampleValue(families, 'edgelimit_shadow_would_block_total', { rule: 'api', tier })).toBe(0)
    }
    // The rules it removed keep their series (a counter does not go away with its rule).
    expect(
      sampleValue(families, 'edgelimit_decisions_total', { rule: 'login', tier: '', outcome: 'denied' }),
    ).toBe(0)
  })

  test('valid after traffic and reloads that rename, remove and re-add rules; no counter goes back', async () => {
    const counters = new Map<string, number>()
    /** Scrapes, and checks that every counter sample is at least what the last scrape said. */
    const check = async () => {
      const families = await scrape()
      for (const family of families.values()) {
        if (family.type !== 'counter' && family.type !== 'histogram') continue
        for (const s of family.samples) {
          if (family.type === 'histogram' && s.name.endsWith('_sum')) continue
          const id = `${s.name}${JSON.stringify(s.labels)}`
          const before = counters.get(id)
          if (before !== undefined) expect(s.value, id).toBeGreaterThanOrEqual(before)
          counters.set(id, s.value)
        }
      }
      return families
    }
    const traffic = async () => {
      for (const path of ['/login', '/login', '/trial', '/trial', '/renamed', '/renamed'])
        await rawRequest(`${gw.url}${path}`)
    }
    const policy = (rules: string) => `identity: { secret: test }\nrules:\n${rules}`
    const login = `  - { name: login, match: { path: /login }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }\n`
    const renamed = `  - { name: renamed, match: { path: /renamed }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }\n`
    await traffic()
    await check()
    for (const rules of [renamed, login + renamed, `${login.replace('limit: 1', 'limit: 2')}`, login]) {
      writeFileSync(gw.file, policy(rules))
      expect((await gw.gateway.reload('test')).ok).toBe(true)
      await traffic()
      await check()
    }
    expect(sampleValue(await scrape(), 'edgelimit_config_last_reload_successful')).toBe(1)
    writeFileSync(gw.file, policy('  - { name: broken, algorithm: gcra, limit: 0, period: 1s }\n'))
    expect((await gw.gateway.reload('test')).ok).toBe(false)
    await traffic()
    const families = await check()
    // The file on disk is not what runs: an alert can say so for as long as it stays so.
    expect(sampleValue(families, 'edgelimit_config_last_reload_successful')).toBe(0)
    expect(sampleValue(families, 'edgelimit_config_reloads_total', { result: 'success' })).toBe(4)
    expect(sampleValue(families, 'edgelimit_config_reloads_total', { result: 'failure' })).toBe(1)
    expect(sampleValue(families, 'edgelimit_config_generation')).toBe(5)
    // The removed rules' counts stay where they were.
    expect(
      sampleValue(families, 'edgelimit_decisions_total', { rule: 'trial', tier: '', outcome: 'allowed' }),
    ).toBe(1)
    expect(sampleValue(families, 'edgelimit_request_duration_seconds_count')).toBe(36)
  })
})

describe('store fallbacks', () => {
  test('on a remote store, each rule asking it has its fallback series at 0 by its onStoreError, from start and reload; local rules and the memory store have none', async () => {
    // A Redis store nothing listens on: the gateway starts, and its rules would fall back.
    const port = await new Promise<number>((resolve) => {
      const s = createServer()
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port
        s.close(() => resolve(p))
      })
    })
    const rules = (extra: string) => `store: redis://127.0.0.1:${port}
identity: { secret: test }
rules:
  - { name: strict, match: { path: /a }, algorithm: fixed-window, limit: 1, window: ${WINDOW}, onStoreError: closed }
  - { name: lenient, match: { path: /b }, algorithm: fixed-window, limit: 1, window: ${WINDOW}, onStoreError: open }
  - { name: burst, match: { path: /c }, algorithm: fixed-window, limit: 1, window: ${WINDOW}, consistency: local }
${extra}`
    const gw = await startInProcess(rules(''), { upstream: origin.url, storeTimeoutMs: 100 })
    try {
      const fallbacks = async () =>
        parseExposition(await (await fetch(`${gw.admin}/metrics`)).text())
          .get('edgelimit_store_fallbacks_total')
          ?.samples.map((s) => `${s.labels.rule} ${s.labels.mode} ${s.value}`)
      expect(await fallbacks()).toEqual(['strict closed 0', 'lenient open 0'])
      writeFileSync(
        gw.file,
        rules(
          `  - { name: api, match: { path: /d }, algorithm: fixed-window, limit: 1, window: ${WINDOW}, onStoreError: local }`,
        ),
      )
      expect((await gw.gateway.reload('test')).ok).toBe(true)
      expect(await fallbacks()).toEqual(['strict closed 0', 'lenient open 0', 'api local 0'])
    } finally {
      await gw.close()
    }
    const memory = await startInProcess(
      `identity: { secret: test }
rules:
  - { name: strict, match: { path: /a }, algorithm: fixed-window, limit: 1, window: ${WINDOW} }
`,
      { upstream: origin.url },
    )
    try {
      const families = parseExposition(await (await fetch(`${memory.admin}/metrics`)).text())
      expect(families.get('edgelimit_store_fallbacks_total')?.samples ?? []).toEqual([])
    } finally {
      await memory.close()
    }
  })
})
