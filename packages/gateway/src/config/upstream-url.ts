import { describeUrl } from './secret.js'

// A user or password: an `@` before the authority ends (at the first `/`, `\`, `?` or `#`, as the
// URL parser reads an http URL), whatever the parser then makes of it.
const CREDENTIALS = /^[a-z][a-z\d+.-]*:[/\\]*[^/\\?#]*@/i

/**
 * What an upstream URL holds that the gateway would not send, one message per part (none when
 * it sends the URL whole). The gateway forwards each request's own target under the URL's path,
 * with the client's own headers: a user, password, query or fragment in the URL would be
 * dropped, so it is refused instead (docs/decisions/0015-upstream-url-is-an-address.md). Every
 * message shows the URL masked: a password never reaches a log.
 *
 * @example upstreamUrlProblems('http://u:pw@app:3000') // ['expected an upstream URL without a user or password, got "http://***@app:3000" (string): …']
 */
export function upstreamUrlProblems(url: string): string[] {
  const problems: string[] = []
  if (CREDENTIALS.test(url)) {
    problems.push(
      `expected an upstream URL without a user or password, got ${describeUrl(url)}: the gateway sends no credentials of its own; remove them (a client's own Authorization header reaches the upstream as sent)`,
    )
  }
  if (/[?#]/.test(url)) {
    problems.push(
      `expected an upstream URL without a query or fragment, got ${describeUrl(url)}: each request reaches the upstream with its own query, and the gateway adds none; remove it (the URL's path is a prefix: "http://app/base" and "/x?y=1" make "/base/x?y=1")`,
    )
  }
  return problems
}

/**
 * What is wrong with an upstream URL given outside the policy (`--upstream`, `startGateway`'s
 * `upstream`), checked as the policy's `upstream` is: http or https with a host, then
 * `upstreamUrlProblems`. Every message shows the URL masked; none when the gateway can use it.
 *
 * @example upstreamOverrideProblems('ftp://files') // ['expected a URL starting with http:// or https://, got "ftp://files" (string)']
 */
export function upstreamOverrideProblems(value: unknown): string[] {
  let url: URL | undefined
  try {
    url = typeof value === 'string' ? new URL(value) : undefined
  } catch {}
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '')
    return [`expected a URL starting with http:// or https://, got ${describeUrl(value)}`]
  return upstreamUrlProblems(value as string)
}
