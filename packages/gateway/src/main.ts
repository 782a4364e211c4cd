import { existsSync } from 'node:fs'
import { checkFiles } from './check.js'
import { parseCommandArgs, UsageError } from './report/io.js'
import { VERSION } from './version.js'

const USAGE = `edgelimit — a rate-limiting reverse proxy driven by one YAML policy

Usage:
  edgelimit serve --config <file> [--upstream <url>] [--port 8080] [--admin-port 9090]
                  [--host 127.0.0.1] [--admin-host 127.0.0.1] [--log-level info]
                  [--drain-timeout 30s] [--no-watch] [-q] [-h]
  edgelimit check [<file>|-...]      validate policies offline (exit 1 on problems; edgelimit.yaml)
  edgelimit simulate [scenario…|all] [--config <file>] [--html <file>]
                                     every algorithm (or the policy's rules) on the same traffic
  edgelimit replay <access.log…> --config <file> [--html <file>]
                                     what the policy would have blocked, from a log (CLF, JSON, gz)
  edgelimit bench --config <file> [--concurrency 1,16,256] [--duration 2s] [--rule <name>]
                                     decisions/s and latency of each rule on the policy's store
  edgelimit --version                this edgelimit's version, and Node's

Environment: EDGELIMIT_ADMIN_TOKEN (admin API bearer token), any \${VAR} the policy uses.
Signals: SIGHUP reloads the policy; SIGTERM and SIGINT drain requests in flight, then exit.`

/** The policy every command reads when none is named. */
const DEFAULT_POLICY = 'edgelimit.yaml'

/** `edgelimit check --help`. */
const CHECK_USAGE = `Usage: edgelimit check [<file>...] [-c <file>]

Validates policy files offline (no store or upstream is contacted) and reports every problem with
its file, line, column and path (the first 1,000 of a file). For CI and deploy pipelines.
Without a file: edgelimit.yaml, as serve reads it. - is standard input (named <stdin>).

Options:
  -c, --config <file>  a policy file, as serve takes it (repeatable; with the files named too)
  -h, --help           this help
Exit codes: 0 every file valid, 1 problems found, 2 usage error or output that cannot be written.
`

/** The `edgelimit` command line. Resolves the process exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  try {
    return await run(command, rest)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    process.stderr.write(`edgelimit ${command}: ${error.message}\n`)
    return 2
  }
}

async function run(command: string | undefined, rest: string[]): Promise<number> {
  switch (command) {
    case 'serve': {
      // `check` stays light: the proxy, metrics and logging load only to serve.
      const { serve } = await import('./serve.js')
      return serve(rest)
    }
    case 'check': {
      const { values, positionals } = parseCommandArgs({
        args: [...rest],
        allowPositionals: true,
        options: {
          help: { type: 'boolean', short: 'h' },
          config: { type: 'string', short: 'c', multiple: true },
        },
      })
      if (values.help === true) {
        process.stdout.write(CHECK_USAGE)
        return 0
      }
      const files = [...(values.config ?? []), ...positionals]
      if (files.filter((f) => f === '-').length > 1)
        throw new UsageError('- (standard input) named twice: it can be read once')
      if (files.length === 0) {
        if (!existsSync(DEFAULT_POLICY)) {
          process.stderr.write(
            `edgelimit check: no policy named and no ${DEFAULT_POLICY} here: name one (edgelimit check <file>... or -c <file>)\n`,
          )
          return 2
        }
        files.push(DEFAULT_POLICY)
      }
      const report = checkFiles(files)
      const out = report.ok ? process.stdout : process.stderr
      out.write(`${report.lines.join('\n')}\n`)
      return report.ok ? 0 : 1
    }
    case 'simulate': {
      const { runSimulate } = await import('./simulate/index.js')
      return runSimulate(rest, process)
    }
    case 'replay': {
      const { runReplay } = await import('./replay/index.js')
      return runReplay(rest, process)
    }
    case 'bench': {
      const { runBench } = await import('./bench/index.js')
      return runBench(rest, process)
    }
    case 'version':
    case '--version':
    case '-V':
      process.stdout.write(`edgelimit ${VERSION} (Node ${process.version})\n`)
      return 0
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`)
      return command === undefined ? 2 : 0
    default:
      process.stderr.write(`edgelimit: unknown command "${command}"\n\n${USAGE}\n`)
      return 2
  }
}
