import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { sendProblem } from './problem.js'

/** Ends a request body that grew past `clients.maxBodySize`: the upstream request is aborted with it. */
export class BodyTooLarge extends Error {
  constructor(readonly max: number) {
    super(`the request body is larger than ${max} bytes`)
    this.name = 'BodyTooLarge'
  }
}

/**
 * Answers 413 when the request's `Content-Length` says more than `max` bytes, before its body is
 * read and before any rule is charged (where nginx checks `client_max_body_size`); true if it did.
 *
 * @example if (refusedForSize(req, res, '/upload', 10_485_760)) return
 */
export function refusedForSize(
  req: IncomingMessage,
  res: ServerResponse,
  instance: string,
  max: number | undefined,
): boolean {
  const length = req.headers['content-length']
  if (max === undefined || length === undefined || !(Number(length) > max)) return false
  refuseTooLarge(res, instance, max)
  return true
}

/**
 * Answers 413 with `Connection: close`: the body not read (the rest of it) is never read.
 *
 * @example refuseTooLarge(res, '/upload', 10_485_760)
 */
export function refuseTooLarge(
  res: ServerResponse,
  instance: string,
  max: number,
  extra: readonly (readonly [string, string])[] = [],
): void {
  sendProblem(res, 413, instance, `The request body is larger than the gateway accepts (${max} bytes).`, [
    ...extra,
    ['connection', 'close'],
  ])
}

/**
 * The body as it arrives, failing with `BodyTooLarge` once it passes `max` bytes (a chunked body,
 * whose size nobody declared). The request is not destroyed, so that a 413 can still be sent on
 * its connection.
 *
 * @example pool.dispatch({ ..., body: upTo(req, 10_485_760) }, handler)
 */
export function upTo(req: IncomingMessage, max: number): Readable {
  return Readable.from(counted(req, max), { objectMode: false })
}

async function* counted(req: IncomingMessage, max: number): AsyncGenerator<Buffer> {
  let size = 0
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > max) throw new BodyTooLarge(max)
    yield chunk
  }
}
