// CONNECT asks for a tunnel, which a reverse proxy does not open: the client gets an answer that
// says so (Node would close the connection without one), and metrics count it.
import { connect } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { type InProcess, startInProcess } from './support/gateway.js'

let gw: InProcess

beforeAll(async () => {
  // No request reaches the upstream here: any address will do.
  gw = await startInProcess('rules: []\n', { upstream: 'http://127.0.0.1:9' })
})
afterAll(async () => {
  await gw?.close()
})

test('CONNECT gets a 405 problem with Connection: close, counted in edgelimit_responses_total', async () => {
  const socket = connect(gw.gateway.port, '127.0.0.1')
  socket.on('error', () => {})
  let text = ''
  socket.on('data', (data: Buffer) => {
    text += data.toString('latin1')
  })
  socket.write('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n')
  await new Promise((resolve) => socket.on('close', resolve))
  expect(text).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/)
  expect(text).toMatch(/\r\nconnection: close\r\n/i)
  expect(text).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i)
  const problem = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>
  expect(problem).toMatchObject({ status: 405, title: 'Method Not Allowed' })
  expect(String(problem.detail)).toContain('CONNECT')
  const metrics = await (await fetch(`${gw.admin}/metrics`)).text()
  expect(metrics).toContain('edgelimit_responses_total{code="405"} 1')
  expect(metrics).toContain('edgelimit_in_flight_requests 0')
})
