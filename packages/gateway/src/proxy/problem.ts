import { type ServerResponse, STATUS_CODES } from 'node:http'

// Node still names these as RFC 7231 did; RFC 9110 §15.5.14 and §15.5.21 renamed them.
const TITLES: Readonly<Record<number, string>> = { 413: 'Content Too Large', 422: 'Unprocessable Content' }

/**
 * Answers with an RFC 9457 problem (`application/problem+json`, `Cache-Control: no-store`) for
 * the gateway's own errors: 502/504 for upstream failures, 500, 503 while draining. `code`, when
 * given, is an extension member (`"code": "ERR_BODY"`) a client can branch on.
 *
 * @example sendProblem(res, 502, '/orders', 'The upstream could not be reached (ECONNREFUSED).')
 */
export function sendProblem(
  res: ServerResponse,
  status: number,
  instance: string,
  detail: string,
  extra: readonly (readonly [string, string])[] = [],
  code?: string,
): void {
  const body = JSON.stringify({
    type: 'about:blank',
    title: TITLES[status] ?? STATUS_CODES[status] ?? 'Error',
    status,
    ...(code === undefined ? {} : { code }),
    detail,
    instance,
  })
  const headers: Record<string, string> = {}
  for (const [name, value] of extra) headers[name.toLowerCase()] = value
  headers['content-type'] = 'application/problem+json'
  headers['cache-control'] = 'no-store'
  headers['content-length'] = String(Buffer.byteLength(body))
  res.writeHead(status, headers)
  res.end(body)
}
