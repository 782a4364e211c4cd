import type { HttpRequest, HttpVerdict } from '../http/rate-limit.js'
import { pathOf, sleep } from './shared.js'

/** The part of Node's `IncomingMessage` the adapter reads (Express and Fastify's `raw` fit too). */
export interface NodeRequestLike {
  readonly method?: string | undefined
  readonly url?: string | undefined
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>
  readonly socket?: { readonly remoteAddress?: string | undefined } | null | undefined
}

/** The part of Node's `ServerResponse` the adapter writes. */
export interface NodeResponseLike {
  statusCode: number
  setHeader(name: string, value: string): unknown
  end(body?: string): unknown
}

/** Reads a Node request as the HTTP layer's request; repeated header lines are joined with `, `. */
export function fromNodeRequest(req: NodeRequestLike, path = pathOf(req.url)): HttpRequest {
  return {
    method: req.method ?? 'GET',
    path,
    header(name) {
      const value = req.headers[name.toLowerCase()]
      return typeof value === 'string' || value === undefined ? value : value.join(', ')
    },
    peer: req.socket?.remoteAddress,
  }
}

/**
 * Applies a verdict to a Node response: the rate-limit headers, or the whole 429/503 answer.
 * Resolves `true` when the request may go on (after the shaping delay), `false` once answered.
 */
export async function applyNodeVerdict(res: NodeResponseLike, verdict: HttpVerdict): Promise<boolean> {
  if (verdict.action === 'respond' && verdict.response !== undefined) {
    res.statusCode = verdict.response.status
    for (const [name, value] of verdict.response.headers) res.setHeader(name, value)
    res.end(verdict.response.body)
    return false
  }
  for (const [name, value] of verdict.headers) res.setHeader(name, value)
  await sleep(verdict.delayMs)
  return true
}
