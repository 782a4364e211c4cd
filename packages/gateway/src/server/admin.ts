import { timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { type AddressInfo, isIP } from 'node:net'
import type { Decision } from 'edgelimit'
import type { Logger } from 'pino'
import { describe } from '../library.js'
import type { CompiledPolicy, CompiledRule, Plan } from '../policy/compile.js'
import { canonicalPath, hostForm, routeForm } from '../policy/path.js'
import type { RequestInfo } from '../policy/request.js'
import { sendProblem } from '../proxy/problem.js'
import { createDashboard } from './dashboard.js'
import type { Metrics } from './metrics.js'

/** The operations port: metrics, health, and the admin API. */
export interface AdminServer {
  readonly port: number
  close(): Promise<void>
}

export interface AdminOptions {
  port: number
  host: string
  metrics: Metrics
  log: Logger
  /** The bearer token; `undefined` turns the admin API off (404). */
  token(): string | undefined
  policy(): CompiledPolicy
  ready(): { ready: boolean } & Record<string, unknown>
  reload(): Promise<{ ok: boolean; issues: readonly unknown[] }>
}

/** The body of `POST /admin/peek` and `/admin/reset`: a rule, and a key or a request that yields one. */
interface KeyQuery {
  rule?: unknown
  tier?: unknown
  /** The store key as logged (`key` in "shadow: would block" lines). */
  key?: unknown
  ip?: unknown
  method?: unknown
  path?: unknown
  host?: unknown
  headers?: unknown
  query?: unknown
}

const MAX_BODY = 64 * 1024

/** The fields of a `KeyQuery`: any other name is refused, as a misspelt `ip` would key another client. */
const QUERY_FIELDS = ['rule', 'tier', 'key', 'ip', 'method', 'path', 'host', 'headers', 'query']

/** The methods each path of the operations port answers (others get 405 with `Allow`). */
const ALLOW = new Map([
  ['/metrics', 'GET, HEAD'],
  ['/healthz', 'GET, HEAD'],
  ['/readyz', 'GET, HEAD'],
  ['/admin/rules', 'GET, HEAD'],
  ['/admin/peek', 'POST'],
  ['/admin/reset', 'POST'],
  ['/admin/reload', 'POST'],
])

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body)}\n`
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
  res.end(text)
}

/**
 * `Authorization: Bearer <token>`, the scheme in any case (RFC 7235), against a trimmed token,
 * byte for byte: Node reads a header's bytes as Latin-1, so they are taken back as sent and
 * compared with the token's UTF-8 (what curl and shells send for `pässwörd`).
 */
function authorized(req: IncomingMessage, token: string): boolean {
  const bearer = /^bearer[ \t]+(.*)$/is.exec(req.headers.authorization ?? '')
  // Only spaces and tabs around it (HTTP's whitespace): trim() would also take a 0xA0 byte, the
  // end of a UTF-8 character such as `à`.
  const given = Buffer.from((bearer?.[1] ?? '').replace(/^[ \t]+|[ \t]+$/g, ''), 'latin1')
  const expected = Buffer.from(token, 'utf8')
  return given.length === expected.length && timingSafeEqual(given, expected)
}

// Marks an error the admin API answers as a problem with this status and code.
const ANSWER = Symbol('edgelimit.admin-answer')
type Answered = Error & { [ANSWER]: { status: number; code: string } }

const answered = (status: number, code: string, message: string): Answered =>
  Object.assign(new Error(message), { [ANSWER]: { status, code } })

/** A body too large: answered 413, then the connection closes (see `refuse`). */
const tooLarge = () => answered(413, 'ERR_TOO_LARGE', `the body is larger than ${MAX_BODY / 1024} KiB`)

/** No such path on the operations port. */
const NOT_FOUND = 'ERR_NOT_FOUND'

/** The store failed: the admin call could not be done (its error is logged, not shown). */
const STORE_UNAVAILABLE = 'ERR_STORE_UNAVAILABLE'

/**
 * The response of a request that expects `100 Continue`, until its body is read: Node would invite
 * the body at once, before a 401, 404 or 413 refused it.
 */
const INVITE = Symbol('edgelimit.invite')
type Invited = IncomingMessage & { [INVITE]?: ServerResponse }

/** A JSON object body (an empty body is `{}`); anything else rejects with a clear message. */
function readBody(req: Invited): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length'] ?? 0) > MAX_BODY) return reject(tooLarge())
    req[INVITE]?.writeContinue()
    // Counted in bytes as they arrive (a character may take 4), decoded once whole.
    const chunks: Buffer[] = []
    let bytes = 0
    const onData = (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes <= MAX_BODY) {
        chunks.push(chunk)
        return
      }
      req.off('data', onData)
      req.off('end', onEnd)
      reject(tooLarge())
    }
    const onEnd = () => {
      const text = Buffer.concat(chunks).toString('utf8')
      let value: unknown
      try {
        value = text.trim() === '' ? {} : JSON.parse(text)
      } catch {
        reject(answered(400, 'ERR_BODY', 'the body is not JSON'))
        return
      }
      if (typeof value === 'object' && value !== null && !Array.isArray(value))
        resolve(value as Record<string, unknown>)
      else
        reject(
          answered(
            400,
            'ERR_BODY',
            `the body is JSON but not an object: expected {"rule": …, "key" or a request}`,
          ),
        )
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', reject)
  })
}

/**
 * Answers a refused body, then closes the connection once the client has sent the rest (or after
 * a second): closing with unread bytes would reset the connection and lose the answer.
 */
function refuse(req: IncomingMessage, res: ServerResponse, error: Answered): void {
  res.setHeader('connection', 'close')
  sendProblem(res, error[ANSWER].status, req.url ?? '/', error.message, [], error[ANSWER].code)
  req.resume()
  const timer = setTimeout(() => req.socket.destroy(), 1000)
  req.once('end', () => clearTimeout(timer))
  req.socket.once('close', () => clearTimeout(timer))
}

/**
 * The string fields of a JSON object (a Map: a name like `constructor` is no inherited member);
 * `lower`: names in lower case, as header names are read (query parameter names keep theirs).
 */
function strings(value: unknown, lower: boolean): Map<string, string> {
  const out = new Map<string, string>()
  if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value))
      if (typeof v === 'string') out.set(lower ? k.toLowerCase() : k, v)
  }
  return out
}

/**
 * The body of a peek or reset, checked: an unknown field, a field of the wrong type or an `ip` that
 * is no address is a 400, never ignored — ignored, it would describe a request without it, keyed
 * as every request without an address is (a reset would empty that shared bucket instead).
 */
function keyQuery(body: Record<string, unknown>): KeyQuery {
  const unknown = Object.keys(body).find((name) => !QUERY_FIELDS.includes(name))
  if (unknown !== undefined) {
    throw answered(
      400,
      'ERR_BODY',
      `unknown field ${JSON.stringify(unknown)}; expected ${QUERY_FIELDS.join(', ')}`,
    )
  }
  for (const name of ['key', 'ip', 'method', 'path', 'host']) {
    const value = body[name]
    if (value !== undefined && typeof value !== 'string')
      throw answered(400, 'ERR_STRING', `${name}: expected a string, got ${describe(value)}`)
  }
  if (typeof body.ip === 'string' && isIP(body.ip) === 0) {
    throw answered(
      400,
      'ERR_BODY',
      `ip: expected an IPv4 or IPv6 address, got ${JSON.stringify(body.ip.slice(0, 100))}`,
    )
  }
  for (const name of ['headers', 'query']) {
    const value = body[name]
    if (value === undefined) continue
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw answered(
        400,
        'ERR_BODY',
        `${name}: expected an object of strings such as {"x-api-key": "key-123"}, got ${describe(value)}`,
      )
    }
    for (const [field, v] of Object.entries(value)) {
      if (typeof v !== 'string')
        throw answered(400, 'ERR_STRING', `${name}.${field}: expected a string, got ${describe(v)}`)
    }
  }
  return body
}

/** A request as described in an admin call, for keying it as the proxy would. */
function describedRequest(q: KeyQuery): RequestInfo {
  const headers = strings(q.headers, true)
  const query = new URLSearchParams([...strings(q.query, false)]).toString()
  const path = typeof q.path === 'string' ? (canonicalPath(q.path) ?? q.path) : '/'
  return {
    method: typeof q.method === 'string' ? q.method.toUpperCase() : 'GET',
    path,
    routePath: routeForm(path),
    query,
    host: hostForm(typeof q.host === 'string' ? q.host : headers.get('host')),
    header: (name) => headers.get(name),
    peer: typeof q.ip === 'string' ? q.ip : undefined,
  }
}

/** A peek (a cost-0 decision): what is left, and whether the rule's next request would pass. */
function view(decision: Decision, cost: number) {
  const { limit, remaining, resetAfterMs } = decision
  return { limit, remaining, resetAfterMs, admitsNext: remaining >= Math.max(1, cost) }
}

function methodNotAllowed(
  res: ServerResponse,
  method: string | undefined,
  path: string,
  allow: string,
): void {
  sendProblem(res, 405, path, `${method} is not allowed here: ${allow}.`, [['allow', allow]], 'ERR_METHOD')
}

/**
 * Resolves which rule, plans and key an admin call means; throws a 404 for an unknown rule or
 * tier, a 400 for a tier that is not a string.
 */
function target(policy: CompiledPolicy, q: KeyQuery): { rule: CompiledRule; plans: Plan[]; key: string } {
  const names = policy.rules.map((r) => r.name).join(', ')
  if (typeof q.rule !== 'string') {
    throw q.rule === undefined
      ? answered(400, 'ERR_BODY', `rule: required, the rule whose key to name (rules: ${names})`)
      : answered(400, 'ERR_STRING', `rule: expected a rule name (${names}), got ${describe(q.rule)}`)
  }
  const rule = policy.rules.find((r) => r.name === q.rule)
  if (rule === undefined) {
    throw answered(404, 'ERR_UNKNOWN_RULE', `no rule named ${JSON.stringify(q.rule)}; rules: ${names}`)
  }
  if (q.tier !== undefined && typeof q.tier !== 'string') {
    const names = [...rule.plans.keys()].filter((t) => t !== '').join(', ')
    throw answered(
      400,
      'ERR_STRING',
      `tier: expected a plan name of rule ${rule.name} (${names || 'none: it has no tiers'}), got ${describe(q.tier)}`,
    )
  }
  if (q.tier !== undefined && !rule.plans.has(q.tier)) {
    throw answered(404, 'ERR_UNKNOWN_TIER', `rule ${rule.name} has no tier ${JSON.stringify(q.tier)}`)
  }
  const byTier = q.tier === undefined ? undefined : (rule.plans.get(q.tier) as Plan)
  if (typeof q.key === 'string' && q.key !== '') {
    return { rule, plans: byTier !== undefined ? [byTier] : [...rule.plans.values()], key: q.key }
  }
  // Every request the proxy keys has its client's address: one described without it names a key
  // no client has, and a reset of it would answer 200 having forgotten nothing.
  if (q.ip === undefined && rule.config.key.some((p) => p.kind === 'ip')) {
    throw answered(
      400,
      'ERR_BODY',
      `rule ${rule.name} counts by client address: give the request's ip, or the key a log line shows`,
    )
  }
  const request = describedRequest(q)
  const route = rule.match(request) ?? rule.config.match.paths[0] ?? '*'
  const { key, raw } = rule.key(request, route, {})
  // Without a header or parameter of its key the proxy counts a request by its client's address
  // (`raw` is then empty): described without the ip, it names that same key no client has.
  if (raw === '' && q.ip === undefined) {
    const parts = rule.config.key.map(keyPart)
    const lacks =
      parts.length === 1
        ? `${parts[0]}, which the request described lacks`
        : `${parts.join(' + ')}, and the request described lacks one of them`
    throw answered(
      400,
      'ERR_BODY',
      `rule ${rule.name} is keyed by ${lacks} (such a request counts by its client address): give it, the request's ip, or the key a log line shows`,
    )
  }
  return { rule, plans: [byTier ?? rule.planFor(request, raw)], key }
}

/** A part of a rule's key as the policy names it: `ip`, `header:x-api-key`. */
const keyPart = (p: CompiledRule['config']['key'][number]): string =>
  'name' in p ? `${p.kind}:${p.name}` : p.kind

/**
 * Starts the operations server: `GET /metrics` (Prometheus), `GET /healthz` (the process is up),
 * `GET /readyz` (503 while draining, or while the store is unreachable and a fail-closed rule
 * would refuse every request), `GET /dashboard` (the live dashboard, read-only like
 * `/metrics`; its stream is `GET /dashboard/events`), and, with a bearer token, `GET /admin/rules`,
 * `POST /admin/peek`, `POST /admin/reset` and `POST /admin/reload`.
 *
 * @example await startAdmin({ port: 9090, host: '127.0.0.1', metrics, log, token: () => process.env.TOKEN, … })
 */
export async function startAdmin(options: AdminOptions): Promise<AdminServer> {
  const { metrics, log } = options
  const dashboard = createDashboard({
    data: metrics.dashboard,
    context: () => {
      const policy = options.policy()
      const state = options.ready()
      return {
        rules: policy.rules.map((r) => ({ name: r.name, mode: r.config.mode, enforce: r.config.enforce })),
        store: { type: policy.store.type, status: policy.store.status() },
        generation: typeof state.generation === 'number' ? state.generation : 0,
        draining: state.draining === true,
      }
    },
  })
  const server = createServer(serve)
  server.on('checkContinue', (req: Invited, res: ServerResponse) => {
    req[INVITE] = res
    serve(req, res)
  })

  function serve(req: IncomingMessage, res: ServerResponse): void {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) return
      const instance = req.url ?? '/'
      if (error instanceof Error && ANSWER in error) {
        const { status, code } = (error as Answered)[ANSWER]
        if (status === 413) refuse(req, res, error as Answered)
        else sendProblem(res, status, instance, error.message, [], code)
        return
      }
      log.error({ err: error, path: instance }, 'admin: internal error')
      sendProblem(res, 500, instance, 'The admin call failed (logged).', [], 'ERR_INTERNAL')
    })
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/'
    // HEAD is answered as GET: Node sends the status and headers without the body.
    const method = req.method === 'HEAD' ? 'GET' : req.method
    const allow = ALLOW.get(path)
    const notAllowed = allow !== undefined && !allow.split(', ').includes(req.method ?? '')
    const admin = path.startsWith('/admin/')
    if (notAllowed && !admin) return methodNotAllowed(res, req.method, path, allow as string)
    if (method === 'GET' && path === '/metrics') {
      const text = await metrics.registry.metrics()
      res.writeHead(200, { 'content-type': metrics.registry.contentType })
      res.end(text)
      return
    }
    if (method === 'GET' && path === '/healthz') return json(res, 200, { status: 'ok' })
    if (method === 'GET' && path === '/readyz') {
      const state = options.ready()
      return json(res, state.ready ? 200 : 503, state)
    }
    if (dashboard.handle(req, res, path)) return
    if (!admin) return sendProblem(res, 404, path, 'Not found.', [], NOT_FOUND)
    // A token read from a secret file often ends with a newline: whitespace is not part of it.
    const token = options.token()?.trim()
    if (token === undefined || token === '') {
      return sendProblem(
        res,
        404,
        path,
        'The admin API is off: set admin.token in the policy (or EDGELIMIT_ADMIN_TOKEN).',
        [],
        'ERR_ADMIN_OFF',
      )
    }
    if (!authorized(req, token)) {
      return sendProblem(
        res,
        401,
        path,
        'A valid bearer token is required.',
        [['www-authenticate', 'Bearer realm="edgelimit admin"']],
        'ERR_UNAUTHORIZED',
      )
    }
    if (notAllowed) return methodNotAllowed(res, req.method, path, allow as string)
    const policy = options.policy()
    if (method === 'GET' && path === '/admin/rules') {
      return json(res, 200, {
        rules: policy.rules.map((r) => ({
          name: r.name,
          mode: r.config.mode,
          enforce: r.config.enforce,
          key: r.config.key.map(keyPart),
          match: r.config.match,
          plans: [...r.plans.values()].map((p) => ({
            tier: p.tier,
            name: p.name,
            ...p.limiter.rules[0]?.policy,
          })),
        })),
      })
    }
    if (req.method === 'POST' && (path === '/admin/peek' || path === '/admin/reset')) {
      const body = keyQuery(await readBody(req))
      const found = target(policy, body)
      if (path === '/admin/peek') {
        const peeks = await Promise.all(found.plans.map((p) => p.inspect(found.key)))
        if (peeks.some((p) => p.fallback)) {
          throw answered(
            503,
            STORE_UNAVAILABLE,
            "The store is unreachable: this is what the rule would answer without it, not the key's state.",
          )
        }
        const plans = found.plans.map((p, i) => ({
          tier: p.tier,
          name: p.name,
          decision: view((peeks[i] as { decision: Decision }).decision, found.rule.config.cost),
        }))
        return json(res, 200, { rule: found.rule.name, key: found.key, plans })
      }
      try {
        await Promise.all(found.plans.map((p) => p.limiter.reset(found.key)))
      } catch (error) {
        log.warn({ rule: found.rule.name, key: found.key, err: error }, 'admin: reset failed')
        throw answered(
          503,
          STORE_UNAVAILABLE,
          'The store is unreachable or did not answer in time: the reset is not confirmed. Try again once it is back.',
        )
      }
      log.info(
        { rule: found.rule.name, key: found.key, tiers: found.plans.map((p) => p.tier) },
        'admin: key reset',
      )
      return json(res, 200, { rule: found.rule.name, key: found.key, reset: found.plans.map((p) => p.name) })
    }
    if (req.method === 'POST' && path === '/admin/reload') {
      const result = await options.reload()
      return json(res, result.ok ? 200 : 422, result)
    }
    return sendProblem(
      res,
      404,
      path,
      'Not found: GET /admin/rules, POST /admin/peek, /admin/reset, /admin/reload.',
      [],
      NOT_FOUND,
    )
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host, () => resolve())
  })
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        dashboard.close()
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
