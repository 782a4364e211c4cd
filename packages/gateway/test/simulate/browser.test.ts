import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { ReplayResult } from '../../src/replay/index.js'
import { runReplay } from '../../src/replay/index.js'
import { runSimulate, type SimulationResult } from '../../src/simulate/index.js'
import { captureIo } from '../replay/io.js'
import { CHROMIUM_AVAILABLE, launchChromium, RESULTS as OUT } from '../support/chromium.js'

// Real Chromium (Debian's `chromium`), driven by playwright-core: the reports as a user sees them.
// (The live dashboard's browser test is test/dashboard/browser.test.ts.)
const SAMPLE = path.resolve(__dirname, '../../../../../shared/data/apache_access_sample.log')

interface ChartInfo {
  labels: string[]
  lengths: number[]
  sums: number[]
}

describe.skipIf(!CHROMIUM_AVAILABLE)('HTML reports in Chromium', () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
  })

  /** Opens a report; fails on any page error, console error or request leaving the file. */
  async function open(
    file: string,
  ): Promise<{ page: Page; charts: Record<string, ChartInfo>; problems: string[] }> {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
    const problems: string[] = []
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`)
    })
    page.on('request', (r) => {
      if (!r.url().startsWith('file:')) problems.push(`request: ${r.url()}`)
    })
    await page.goto(`file://${file}`)
    await page.waitForFunction(() => document.body.dataset.ready === 'true', undefined, { timeout: 20_000 })
    const charts = await page.evaluate(() => {
      const all = (
        window as unknown as {
          __edgelimitCharts: Record<string, { series: { label: string }[]; data: number[][] }>
        }
      ).__edgelimitCharts
      return Object.fromEntries(
        Object.entries(all).map(([id, u]) => [
          id,
          {
            labels: u.series.map((s) => String(s.label)),
            lengths: u.data.map((d) => d.length),
            sums: u.data.map((d) => d.reduce((a, b) => a + (b ?? 0), 0)),
          },
        ]),
      )
    })
    return { page, charts, problems }
  }

  /** Pixels of a chart's canvas that are not background: the chart was really drawn. */
  async function inked(page: Page, id: string): Promise<number> {
    return page.evaluate((chart) => {
      const canvas = document.querySelector(`#${chart} canvas`) as HTMLCanvasElement
      const data = (canvas.getContext('2d') as CanvasRenderingContext2D).getImageData(
        0,
        0,
        canvas.width,
        canvas.height,
      ).data
      let n = 0
      for (let i = 3; i < data.length; i += 4) if ((data[i] as number) > 0) n++
      return n
    }, id)
  }

  test('simulate: one chart per algorithm with admitted and denied, plus the overview', async () => {
    const html = path.join(OUT, 'simulate-report.html')
    const io = captureIo(OUT)
    expect(
      await runSimulate(
        ['boundary-burst', 'credential-stuffing', '--html', html, '--json', 'simulate-report.json'],
        io,
      ),
    ).toBe(0)
    const results = JSON.parse(
      readFileSync(path.join(OUT, 'simulate-report.json'), 'utf8'),
    ) as SimulationResult[]
    const { page, charts, problems } = await open(html)
    expect(Object.keys(charts)).toHaveLength(2 * 8)
    const [burst, stuffing] = results as [SimulationResult, SimulationResult]
    expect(charts['s0-admitted']?.labels).toEqual([
      'seconds',
      'offered',
      ...burst.algorithms.map((a) => a.label),
    ])
    expect(charts['s0-admitted']?.lengths).toEqual(Array(9).fill(burst.starts.length))
    expect(charts['s0-admitted']?.sums.slice(1)).toEqual([
      burst.requests,
      ...burst.algorithms.map((a) => a.admitted),
    ])
    for (const a of burst.algorithms) {
      const c = charts[`s0-${a.id}`]
      expect(c?.labels).toEqual(['seconds', 'admitted', 'denied'])
      expect(c?.lengths).toEqual([300, 300, 300])
      expect(c?.sums.slice(1)).toEqual([a.admitted, a.denied])
    }
    // The headline, as drawn: the fixed window denies nothing of the boundary burst, the log 400.
    expect(charts['s0-fixed-window']?.sums.slice(1)).toEqual([2300, 0])
    expect(charts['s0-sliding-log']?.sums.slice(1)).toEqual([1900, 400])
    expect(charts['s1-fixed-window']?.sums.slice(1)).toEqual([stuffing.requests, 0])
    expect(await inked(page, 's0-admitted')).toBeGreaterThan(1000)
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText keeps the cell separators
    expect(await page.locator('table').first().innerText()).toContain('200 / 100')
    await page.screenshot({ path: path.join(OUT, 'simulate-report.png') })
    await page.screenshot({ path: path.join(OUT, 'simulate-report-full.png'), fullPage: true })
    expect(problems).toEqual([])
  })

  test('replay: the overview and one timeline per rule over the real sample log', async () => {
    const html = path.join(OUT, 'replay-report.html')
    const policy = path.join(OUT, 'replay-policy.yaml')
    writeFileSync(
      policy,
      `rules:
  - { name: per-ip, algorithm: sliding-window, limit: 60, window: 1m }
  - { name: burst, algorithm: token-bucket, capacity: 10, refillRate: 1 }
`,
    )
    const io = captureIo(OUT)
    expect(
      await runReplay([SAMPLE, '--config', policy, '--html', html, '--json', 'replay-report.json'], io),
    ).toBe(0)
    const r = JSON.parse(readFileSync(path.join(OUT, 'replay-report.json'), 'utf8')) as ReplayResult
    const { page, charts, problems } = await open(html)
    const buckets = r.timeline.starts.length
    expect(charts.overview?.labels).toEqual(['time', 'requests', 'would block (any rule)', 'per-ip', 'burst'])
    expect(charts.overview?.lengths).toEqual(Array(5).fill(buckets))
    expect(charts.overview?.sums.slice(1)).toEqual([10_000, r.denied, r.rules[0]?.denied, r.rules[1]?.denied])
    expect(charts['rule-0']?.labels).toEqual(['time', 'requests', 'would block'])
    expect(charts['rule-0']?.sums.slice(1)).toEqual([10_000, 87])
    expect(charts['rule-1']?.sums.slice(1)).toEqual([10_000, r.rules[1]?.denied])
    // x values are the buckets' epoch seconds, 10 minutes apart.
    const xs = await page.evaluate(
      () =>
        (window as unknown as { __edgelimitCharts: Record<string, { data: number[][] }> }).__edgelimitCharts
          .overview?.data[0],
    )
    expect((xs?.[1] as number) - (xs?.[0] as number)).toBe(600)
    expect(xs?.[0]).toBe(Date.UTC(2015, 4, 17, 10, 0) / 1000)
    expect(await inked(page, 'rule-0')).toBeGreaterThan(1000)
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText keeps the cell separators
    expect(await page.locator('table').first().innerText()).toMatch(
      /per-ip\s+sliding-window\s+limit=60 window=1m\s+ip\s+10,000\s+87/,
    )
    // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText keeps the cell separators
    expect(await page.locator('section', { hasText: 'Top keys' }).innerText()).toContain('75.97.9.59')
    await page.screenshot({ path: path.join(OUT, 'replay-report.png') })
    await page.screenshot({ path: path.join(OUT, 'replay-report-full.png'), fullPage: true })
    expect(problems).toEqual([])
  })
})
