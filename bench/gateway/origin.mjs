// The origin every contestant of bench/gateway.mjs sits in front of: 12 bytes, keep-alive.
//   node bench/gateway/origin.mjs <port>
import { createServer } from 'node:http'

const BODY = 'hello world\n'
const server = createServer((req, res) => {
  req.resume()
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': BODY.length })
  res.end(BODY)
})
server.keepAliveTimeout = 65_000
server.listen(Number(process.argv[2]), '127.0.0.1', () => process.stdout.write('ready\n'))
