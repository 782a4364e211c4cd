// `node examples/quickstart.mjs` (after `npm run build`): a first look at edgelimit on the embedded memory store.
import { createLimiter, slidingWindow, tokenBucket } from 'edgelimit'

const limiter = createLimiter({
  rules: [
    { name: 'burst', algorithm: tokenBucket({ capacity: 5, refillRate: 1 }) },
    { name: 'sustained', algorithm: slidingWindow({ limit: 20, window: '1m' }) },
  ],
})

console.log('edgelimit quickstart: 8 requests at once from one client against')
console.log('  burst = token bucket (5, +1/s), sustained = sliding window (20 per minute)\n')
for (let i = 1; i <= 8; i++) {
  const d = await limiter.limit('client-42')
  const parts = d.rules.map((r) => `${r.name} ${r.remaining}/${r.limit}`).join(', ')
  console.log(
    `#${i} ${d.allowed ? 'allowed' : 'denied '}  ${parts}${d.allowed ? '' : `  retry in ${d.retryAfterMs} ms`}`,
  )
}
console.log('\nNext: README.md has a runnable example for every algorithm; `npm test` runs the suite.')
