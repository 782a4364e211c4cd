import { connect } from 'node:net'
import { parseDictionary, parseItem, parseList } from 'structured-headers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { workerdTarget } from '../workerd/support/matrix-target.js'
import { edgeRuntimeTarget } from './support/edge-runtime-target.js'
import {
  LEAVE_AFTER_MS,
  leaving,
  type Scenario,
  type Step,
  type Syntax,
  scenarios,
} from './support/scenarios.js'
import {
  bunTarget,
  denoTarget,
  expressTarget,
  fastifyTarget,
  fetchNodeTarget,
  honoDenoTarget,
  honoTarget,
  nodeTarget,
  type Running,
  type Target,
} from './support/servers.js'

const targets: Target[] = [
  nodeTarget,
  expressTarget,
  fastifyTarget,
  honoTarget,
  fetchNodeTarget,
  denoTarget,
  honoDenoTarget,
  bunTarget,
  workerdTarget,
  edgeRuntimeTarget,
]

const isInteger = (value: unknown) => typeof value === 'number' && Number.isInteger(value)

/** Every emitted rate-limit field must parse as the Structured Field its standard defines. */
function checkSyntax(headers: Headers, syntax: readonly Syntax[]): void {
  const get = (name: string) => headers.get(name)
  for (const standard of syntax) {
    if (standard === 'draft-10') {
      const policy = get('ratelimit-policy')
      const limit = get('ratelimit')
      if (policy === null || limit === null) {
        expect([policy, limit]).toEqual([null, null])
        continue
      }
      const policies = parseList(policy)
      const names = policies.map(([name]) => name)
      for (const [name, params] of policies) {
        expect(typeof name).toBe('string')
        expect(isInteger(params.get('q')) && isInteger(params.get('w'))).toBe(true)
      }
      for (const [name, params] of parseList(limit)) {
        expect(names).toContain(name)
        expect(isInteger(params.get('r')) && isInteger(params.get('t'))).toBe(true)
      }
    } else if (standard === 'draft-7') {
      const limit = get('ratelimit')
      if (limit === null) continue
      const fields = parseDictionary(limit)
      for (const key of ['limit', 'remaining', 'reset']) expect(isInteger(fields.get(key)?.[0])).toBe(true)
      for (const [quota, params] of parseList(get('ratelimit-policy') ?? '')) {
        expect(isInteger(quota) && isInteger(params.get('w'))).toBe(true)
      }
    } else {
      const prefix = standard === 'draft-6' ? 'ratelimit' : 'x-ratelimit'
      for (const suffix of ['limit', 'remaining', 'reset']) {
        const value = get(`${prefix}-${suffix}`)
        if (value !== null) expect(isInteger(parseItem(value)[0])).toBe(true)
      }
      const policy = standard === 'draft-6' ? get('ratelimit-policy') : null
      if (policy !== null) expect(isInteger(parseItem(policy)[0])).toBe(true)
    }
  }
  const retryAfter = get('retry-after')
  if (retryAfter !== null) expect(parseItem(retryAfter)[0]).toBeGreaterThanOrEqual(1)
}

/** Sends a request on a connection of its own and closes it `LEAVE_AFTER_MS` later, unanswered. */
async function leave(base: string, step: Step): Promise<void> {
  const { hostname, port } = new URL(base)
  const socket = connect(Number(port), hostname)
  socket.on('error', () => {})
  await new Promise<void>((resolve) =>
    socket.once('connect', () =>
      socket.write(`${step.method ?? 'GET'} ${step.path} HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`, () =>
        resolve(),
      ),
    ),
  )
  // Real time: the server holds the request by the system clock (Deno, Bun) or on its socket.
  await new Promise((resolve) => setTimeout(resolve, LEAVE_AFTER_MS))
  socket.destroy()
}

/** When a request was sent and when its answer had arrived (system clock, ms). */
interface Sent {
  before: number
  after: number
}

/**
 * Runs one step; resolves when its request was sent (undefined for a client that leaves). `first`
 * is the scenario's first request, whose time the state of a scenario's later steps counts from.
 */
async function runStep(
  base: string,
  scenario: Scenario,
  step: Step,
  index: number,
  first?: Sent,
): Promise<Sent | undefined> {
  if (step.leaves) {
    await leave(base, step)
    return undefined
  }
  const what = `${scenario.name}, step ${index + 1}: ${step.method ?? 'GET'} ${step.path}`
  const before = Date.now()
  const res = await fetch(base + step.path, { method: step.method ?? 'GET', headers: step.headers ?? {} })
  const text = await res.text()
  const after = Date.now()
  expect(res.status, what).toBe(step.status)
  const actual = Object.fromEntries(
    Object.keys(step.expect ?? {}).map((name) => [name, res.headers.get(name)]),
  )
  expect(actual, what).toEqual(step.expect ?? {})
  checkSyntax(res.headers, scenario.syntax ?? ['draft-10'])
  if (step.legacyResetIn !== undefined) {
    // On the system clock (subprocess servers) the state every step sees was set by the scenario's
    // first request, which may have been sent a second or more before this one on a loaded machine;
    // under a standing manual clock (in-process servers) the headers count from this request's time
    // (the HTTP layer's header clock is the system clock there). Between the two.
    const reset = Number(res.headers.get('x-ratelimit-reset'))
    expect(reset, what).toBeGreaterThanOrEqual(
      Math.ceil((first ?? { before }).before / 1000) + step.legacyResetIn,
    )
    expect(reset, what).toBeLessThanOrEqual(Math.ceil(after / 1000) + step.legacyResetIn)
  }
  if (step.status === 200) {
    expect(text, what).toBe('ok')
    expect(res.headers.get('x-handler'), what).toBe('yes')
  }
  if (step.problem !== undefined) {
    expect(res.headers.get('content-type'), what).toBe('application/problem+json')
    expect(res.headers.get('cache-control'), what).toBe('no-store')
    expect(JSON.parse(text), what).toEqual({ ...step.problem, detail: expect.any(String) })
    const retryAfter = step.problem.retryAfter
    expect(res.headers.get('retry-after'), what).toBe(retryAfter === undefined ? null : String(retryAfter))
  }
  if (step.json !== undefined) expect(JSON.parse(text), what).toEqual(step.json)
  if (step.body !== undefined) {
    expect(text, what).toBe(step.body)
    // No content announced either (a Content-Length: 0 is allowed).
    if (step.body === '') expect(res.headers.get('content-length') ?? '0', what).toBe('0')
  }
  if (step.minDelayMs !== undefined) expect(after - before, what).toBeGreaterThanOrEqual(step.minDelayMs)
  return { before, after }
}

/** Each target serves `table` and passes every step of every scenario. */
function matrix(title: string, list: readonly Target[], table: readonly Scenario[]) {
  describe.each(list)(`${title}: $name`, (target) => {
    let running: Running | undefined
    beforeAll(async () => {
      running = await target.start(table)
    })
    afterAll(async () => {
      await running?.close()
    })

    it.each(table.map((scenario, index) => ({ ...scenario, index })))('$name', async (scenario) => {
      const base = (running as Running).url(scenario.index)
      let first: Sent | undefined
      for (const [i, step] of scenario.steps.entries()) {
        const sent = await runStep(base, scenario, step, i, first)
        first ??= sent
      }
    })
  })
}

matrix('adapter matrix', targets, scenarios)
// workerd and edge-runtime are reached through a bridge, which a client leaving does not reach.
matrix(
  'adapter matrix, clients that leave',
  [fetchNodeTarget, denoTarget, honoDenoTarget, bunTarget],
  leaving,
)
