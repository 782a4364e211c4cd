// The part of autocannon 9's programmatic API the load test uses (the package ships no types).
declare module 'autocannon' {
  interface AutocannonRequest {
    method?: string
    path?: string
    headers?: Record<string, string>
    /** Called for every response, with its raw headers folded into an object. */
    onResponse?: (
      status: number,
      body: string,
      context: Record<string, unknown>,
      headers: Record<string, string | string[]>,
    ) => void
  }

  interface AutocannonOptions {
    url: string
    connections?: number
    /** Seconds. */
    duration?: number
    pipelining?: number
    timeout?: number
    requests?: AutocannonRequest[]
  }

  interface AutocannonResult {
    duration: number
    errors: number
    timeouts: number
    resets: number
    non2xx: number
    '1xx': number
    '2xx': number
    '3xx': number
    '4xx': number
    '5xx': number
    statusCodeStats: Record<string, { count: number }>
    requests: { average: number; total: number; sent: number }
    latency: { average: number; p99: number }
  }

  function autocannon(options: AutocannonOptions): Promise<AutocannonResult>
  export default autocannon
}
