import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'

/**
 * The responses each connection still owes. Node hands over an upgrade request as soon as it has
 * read it, even one pipelined behind requests whose answers are still being written on its socket:
 * its turn comes once they have gone out.
 */
export interface PendingResponses {
  /** Counts `res` against its connection until it closes (sent, or its connection gone). */
  track(req: IncomingMessage, res: ServerResponse): void
  /**
   * Runs `next` once the responses owed on `socket` have gone out, at once when there are none.
   * Meanwhile nothing reads the socket; one that closes, fails or was ended first (a
   * `Connection: close` answer) is destroyed and `next` never runs.
   */
  after(socket: Duplex, next: () => void): void
}

/**
 * @example
 * const owed = pendingResponses()
 * server.prependListener('request', owed.track)
 * server.on('upgrade', (req, socket, head) => owed.after(socket, () => handle(req, socket, head)))
 */
export function pendingResponses(): PendingResponses {
  const owed = new WeakMap<Duplex, Owed>()
  return {
    track(req, res) {
      let entry = owed.get(req.socket)
      if (entry === undefined) {
        entry = { count: 0 }
        owed.set(req.socket, entry)
      }
      entry.count++
      ;(res as Tracked)[OWED] = entry
      // One listener shared by every response: no closure per request.
      res.on('close', settled)
    },
    after(socket, next) {
      const entry = owed.get(socket)
      if (entry === undefined || entry.count === 0) {
        next()
        return
      }
      const gone = () => {
        entry.next = undefined
        socket.destroy()
      }
      // Node's own listeners left the socket with the upgrade.
      socket.on('error', gone)
      socket.once('close', gone)
      entry.next = () => {
        socket.off('error', gone)
        socket.off('close', gone)
        if (socket.destroyed || !socket.writable) socket.destroy()
        else next()
      }
    },
  }
}

interface Owed {
  count: number
  next?: (() => void) | undefined
}
const OWED = Symbol('edgelimit.owed')
type Tracked = ServerResponse & { [OWED]?: Owed | undefined }

/** A tracked response has closed: its connection owes one fewer (counted once). */
function settled(this: Tracked): void {
  const entry = this[OWED]
  if (entry === undefined) return
  this[OWED] = undefined
  entry.count--
  const next = entry.next
  if (entry.count > 0 || next === undefined) return
  entry.next = undefined
  next()
}
