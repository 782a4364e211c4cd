import { relative } from 'node:path'
import { pino } from 'pino'
import { formatIssue, PolicyError } from './config/issues.js'
import { maskUrl } from './config/secret.js'
import { upstreamOverrideProblems } from './config/upstream-url.js'
import { counted } from './report/format.js'
import { durationFlag, parseCommandArgs, UsageError } from './report/io.js'
import { type Gateway, startGateway } from './server/gateway.js'
import { tryLines } from './server/try.js'
import { VERSION } from './version.js'

function port(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback
  // Digits only: Number() reads '' as 0 (a random port for `--port "$PORT"` with PORT unset).
  const n = /^\d{1,5}$/.test(value) ? Number(value) : Number.NaN
  if (!(n <= 65_535)) throw new UsageError(`--${name}: expected a port from 0 to 65535, got "${value}"`)
  return n
}

/**
 * The host of a URL that reaches a server listening on `host`: a wildcard address as loopback, an
 * IPv6 address in brackets (`http://::1:8080` is no URL, and curl refuses it).
 */
function reachable(host = '127.0.0.1'): string {
  if (host === '0.0.0.0') return '127.0.0.1'
  if (host === '::') return '[::1]'
  return host.includes(':') ? `[${host}]` : host
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

function logLevel(value: string): string {
  if (LOG_LEVELS.includes(value)) return value
  throw new UsageError(`--log-level: expected one of ${LOG_LEVELS.join(', ')}, got "${value}"`)
}

/** The `--upstream` URL, as the policy's `upstream` takes it: http or https, with a host, and nothing the gateway would not send. */
function upstreamFlag(value: string | undefined): string | undefined {
  if (value === undefined) return undefined
  const problems = upstreamOverrideProblems(value)
  if (problems.length > 0) throw new UsageError(problems.map((p) => `--upstream: ${p}`).join('\n'))
  return value
}

/** `edgelimit serve --help`. */
const SERVE_USAGE = `Usage: edgelimit serve --config <file> [options]

Runs the rate-limiting reverse proxy: every request goes through the policy's rules, then to the
upstream; metrics, health, the dashboard and the admin API are on the admin port. See docs/gateway.md.

Options:
  -c, --config <file>        the policy (default edgelimit.yaml)
  -u, --upstream <url>       where requests go (overrides the policy's upstream; without either,
                             a built-in demo origin)
  -p, --port <port>          the proxy's port (default 8080; 0 picks a free one)
  --host <address>           the proxy's address (default 127.0.0.1; 0.0.0.0 in a container)
  --admin-port <port>        the operations port (default 9090)
  --admin-host <address>     its address (default 127.0.0.1)
  --log-level <level>        fatal, error, warn, info (default), debug, trace or silent
  --drain-timeout <duration> how long SIGTERM waits for requests in flight (default 30s)
  --no-watch                 do not reload the policy when its file changes (SIGHUP still does)
  -q, --quiet                no console banner
  -h, --help                 this help
Environment: EDGELIMIT_ADMIN_TOKEN (admin API bearer token), any \${VAR} the policy uses.
Signals: SIGHUP reloads the policy; SIGTERM and SIGINT drain requests in flight, then exit.
`

/**
 * `edgelimit serve`: runs the gateway until SIGTERM or SIGINT (drain, then exit 0); SIGHUP
 * reloads the policy. Resolves the exit code.
 */
export async function serve(args: readonly string[]): Promise<number> {
  const { values } = parseCommandArgs({
    args: [...args],
    options: {
      config: { type: 'string', short: 'c', default: 'edgelimit.yaml' },
      upstream: { type: 'string', short: 'u' },
      port: { type: 'string', short: 'p' },
      host: { type: 'string' },
      'admin-port': { type: 'string' },
      'admin-host': { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      'drain-timeout': { type: 'string', default: '30s' },
      'no-watch': { type: 'boolean', default: false },
      quiet: { type: 'boolean', short: 'q', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  })
  if (values.help === true) {
    process.stdout.write(SERVE_USAGE)
    return 0
  }
  const drainTimeoutMs = durationFlag('drain-timeout', values['drain-timeout'], 30_000, '30s')
  const upstream = upstreamFlag(values.upstream)
  const log = pino(
    {
      level: logLevel(values['log-level']),
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ dest: 1, sync: true }),
  )
  let gateway: Gateway
  // A SIGHUP while starting (up to the store's 10 s wait) would end the process, its default:
  // it is kept for a reload once the gateway is up, as the file may have changed since it was read.
  let hupWhileStarting = false
  const earlyHup = () => {
    hupWhileStarting = true
  }
  process.on('SIGHUP', earlyHup)
  try {
    gateway = await startGateway({
      config: values.config,
      upstream,
      port: port('port', values.port, 8080),
      host: values.host ?? '127.0.0.1',
      adminPort: port('admin-port', values['admin-port'], 9090),
      adminHost: values['admin-host'] ?? '127.0.0.1',
      adminToken: process.env.EDGELIMIT_ADMIN_TOKEN?.trim() || undefined,
      logger: log,
      watch: !values['no-watch'],
      drainTimeoutMs,
    })
  } catch (error) {
    process.off('SIGHUP', earlyHup)
    if (error instanceof PolicyError) {
      process.stderr.write(
        `${error.issues.map((i) => formatIssue(i)).join('\n')}\n✖ ${values.config}: not started\n`,
      )
      return 1
    }
    throw error
  }
  const base = `http://${reachable(values.host)}:${gateway.port}`
  const admin = `http://${reachable(values['admin-host'])}:${gateway.adminPort}`
  if (!values.quiet) {
    const config = gateway.config
    const adminApi =
      process.env.EDGELIMIT_ADMIN_TOKEN?.trim() || config.admin.token?.trim()
        ? 'admin API on (bearer token)'
        : 'admin API off: set EDGELIMIT_ADMIN_TOKEN'
    process.stderr.write(
      [
        '',
        `edgelimit serve — policy ${relative(process.cwd(), values.config) || values.config}: ${counted(config.rules.length, 'rule')}, ${config.store.type} store`,
        `  proxy  ${base}  →  ${gateway.demo ? `built-in demo origin ${gateway.upstreamUrl}` : maskUrl(gateway.upstreamUrl)}`,
        `  admin  ${admin}  (/dashboard, /metrics, /healthz, /readyz; ${adminApi})`,
        '',
        ...tryLines(config, base, admin),
        '',
        'Logs are JSON lines on stdout. Edit the policy to reload it (or send SIGHUP); Ctrl-C drains and stops.',
        '',
      ].join('\n'),
    )
  }
  log.info(
    {
      port: gateway.port,
      adminPort: gateway.adminPort,
      upstream: maskUrl(gateway.upstreamUrl),
      demo: gateway.demo,
      generation: gateway.generation,
      version: VERSION,
    },
    'listening',
  )
  return new Promise<number>((resolve) => {
    // The first SIGTERM or SIGINT drains; a second signal, of either kind, exits at once (exit 1).
    let stopping = false
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return resolve(1)
      stopping = true
      log.info({ signal }, 'shutting down')
      gateway.close().then(
        () => resolve(0),
        () => resolve(1),
      )
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    process.on('SIGHUP', () => void gateway.reload('SIGHUP'))
    process.off('SIGHUP', earlyHup)
    if (hupWhileStarting) void gateway.reload('SIGHUP')
  })
}
