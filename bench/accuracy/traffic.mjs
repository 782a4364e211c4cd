// Synthetic sources for the accuracy study: request times of one source at a time, in order.
//
// The mix (shares of sources) is ours, chosen so that many sources cross the threshold — the
// only place an approximation can be wrong; Cloudflare's 400M requests came from their real
// traffic. Rates are relative to the threshold rate L / W.
//   quiet   60 %  Poisson at 0.02–0.5× the threshold
//   bursty  25 %  on/off: bursts at 0.8–3× for ~1 min (exponential), pauses at 0.05× for ~5 min
//   heavy   15 %  Poisson at 0.5–5× the threshold
// Each source is active for 10–60 minutes, starting at a random phase of the window grid.

import { prng } from '../../packages/edgelimit/test/resilience/approx-trace.mjs'

export const CLASSES = ['quiet', 'bursty', 'heavy']

/** mulberry32: a seeded generator, so a run can be repeated exactly (one definition, in approx-trace.mjs). */
export const random = prng

const exp = (rand, mean) => -Math.log(1 - rand()) * mean

/**
 * Draws one source and calls `emit(t)` for each of its requests (ms from its start, integer,
 * non-decreasing). Returns its class and span.
 */
export function source(rand, limit, windowMs, emit) {
  const base = limit / windowMs // threshold rate, requests per ms
  const u = rand()
  const kind = u < 0.6 ? 'quiet' : u < 0.85 ? 'bursty' : 'heavy'
  const duration = (10 + rand() * 50) * 60_000
  const poisson = (rate, from, to) => {
    for (let t = from + exp(rand, 1 / rate); t < to; t += exp(rand, 1 / rate)) emit(Math.floor(t))
  }
  if (kind === 'quiet') poisson(base * (0.02 + rand() * 0.48), 0, duration)
  else if (kind === 'heavy') poisson(base * (0.5 + rand() * 4.5), 0, duration)
  else {
    for (let t = 0, on = rand() < 0.5; t < duration; on = !on) {
      const span = Math.min(duration - t, exp(rand, on ? 60_000 : 300_000))
      poisson(base * (on ? 0.8 + rand() * 2.2 : 0.05), t, t + span)
      t += span
    }
  }
  return { kind, duration }
}
