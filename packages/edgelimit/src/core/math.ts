/** Exact integer helpers: all inputs are non-negative integers below 2^53. */

/** Greatest common divisor. Ends on any input (`NaN` too: a wrong result, never a hang). */
export function gcd(a: number, b: number): number {
  let x = a
  let y = b
  while (y > 0) {
    const t = x % y
    x = y
    y = t
  }
  return x
}

/** floor(a / b) for integers a ≥ 0, b > 0, exact even where float division rounds. */
export function floorDiv(a: number, b: number): number {
  let q = Math.floor(a / b)
  // Float division can land one off near 2^53; correct with exact integer products.
  if (q * b > a) q--
  else if ((q + 1) * b <= a) q++
  return q
}

/** ceil(a / b) for integers a ≥ 0, b > 0. */
export function ceilDiv(a: number, b: number): number {
  const q = floorDiv(a, b)
  return q * b === a ? q : q + 1
}
