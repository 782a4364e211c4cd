// The baseline of bench/gateway.mjs: a plain reverse proxy on undici with no rate limiting,
// doing the same proxy work as edgelimit (keep-alive pool, streaming both ways, hop-by-hop
// headers stripped, X-Forwarded-For appended, X-Forwarded-Host/-Proto added, 502 on upstream
// errors), so that the difference is the rate limiting.
//   node bench/gateway/plain-proxy.mjs <port> <upstream URL>
import { createServer } from 'node:http'
import { createRequire } from 'node:module'

// The gateway's own undici (the version edgelimit serve runs on).
const { Pool } = createRequire(new URL('../../packages/gateway/package.json', import.meta.url))('undici')

const HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
  'expect',
])
const [port, upstream] = process.argv.slice(2)
const pool = new Pool(upstream, { connections: 128, keepAliveTimeout: 4_000 })

const server = createServer((req, res) => {
  const raw = req.rawHeaders
  const headers = []
  let xff
  let xfh = false
  let xfp = false
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (HOP.has(lower) || lower === 'host') continue
    if (lower === 'x-forwarded-for') xff = xff === undefined ? raw[i + 1] : `${xff}, ${raw[i + 1]}`
    else {
      if (lower === 'x-forwarded-host') xfh = true
      else if (lower === 'x-forwarded-proto') xfp = true
      headers.push(raw[i], raw[i + 1])
    }
  }
  const peer = req.socket.remoteAddress
  headers.push('x-forwarded-for', xff === undefined ? peer : `${xff}, ${peer}`)
  if (!xfh && req.headers.host !== undefined) headers.push('x-forwarded-host', req.headers.host)
  if (!xfp) headers.push('x-forwarded-proto', 'http')
  const length = req.headers['content-length']
  const body = (length === undefined ? req.headers['transfer-encoding'] !== undefined : length !== '0')
    ? req
    : null
  pool.dispatch(
    { path: req.url, method: req.method, headers, body },
    {
      onRequestStart() {},
      onResponseStart(_c, status, h) {
        const out = {}
        for (const name in h) if (!HOP.has(name)) out[name] = h[name]
        res.writeHead(status, out)
      },
      onResponseData(c, chunk) {
        if (!res.write(chunk) && !c.paused) {
          c.pause()
          res.once('drain', () => c.resume())
        }
      },
      onResponseEnd() {
        res.end()
      },
      onResponseError(_c, error) {
        if (res.headersSent) res.destroy(error)
        else {
          res.writeHead(502, { 'content-type': 'text/plain' })
          res.end('bad gateway')
        }
      },
    },
  )
})
server.keepAliveTimeout = 65_000
server.listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'))
