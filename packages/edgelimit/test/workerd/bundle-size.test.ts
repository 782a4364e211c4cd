// The bundle budget, checked on every test run: edge bundles (esbuild --platform=neutral --minify,
// gzip level 9; see bench/edge/size.mjs, also `npm run size`) are runtime-neutral and in budget.
import { beforeAll, expect, it } from 'vitest'
import { BUDGETS, budgetLines, type Measured, measureBundles } from '../../../../bench/edge/size.mjs'

let measured: Measured[]
let lines: ReturnType<typeof budgetLines>
beforeAll(async () => {
  measured = await measureBundles()
  lines = budgetLines(measured)
})

it('every edge bundle is runtime-neutral: no node: imports, require, Buffer or process', () => {
  for (const m of measured) expect(m.nodeisms, m.name).toEqual({})
})

it('core + memory store + headers + fetch adapter ≤ 12 KB min+gzip', () => {
  const [, bytes, budget] = lines[0] as [string, number, number]
  expect(budget).toBe(12 * 1024)
  expect(bytes).toBeLessThanOrEqual(BUDGETS.core)
})

it('the Durable Object store adds ≤ 4 KB min+gzip', () => {
  const [, bytes] = lines[2] as [string, number, number]
  expect(bytes).toBeGreaterThan(0)
  expect(bytes).toBeLessThanOrEqual(BUDGETS.durableObjectStore)
})

// A whole edge app also ships createLimiter (validation, failure policy, denial cache): ~15 KB,
// over the 12 KB budget (see docs/edge.md). This ceiling keeps it from growing unnoticed.
it('the edge app with createLimiter stays under its 16 KB ceiling', () => {
  const [, bytes] = lines[1] as [string, number, number]
  expect(bytes).toBeLessThanOrEqual(BUDGETS.appCeiling)
})
