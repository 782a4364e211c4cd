-- tat.lua: GCRA and the shaping leaky bucket, REFERENCE §2 (mirrors src/core/tat.ts).
-- Time is kept in steps of 1/k ms so that the emission interval T = t steps is exact; the TAT is
-- tatMs + tatSteps / k.
-- KEYS: the rule's state key (a string "tatMs:tatSteps").
-- ARGV (rule params): k, t, slots (GCRA burst, or queue capacity + 1), shape (1 = report delay).

local function tat(key, p, now, cost)
  local k, t, slots, shape = p[1], p[2], p[3], p[4]
  local r = row(key, 2)
  local tatms, tatsteps = r[1], r[2]
  local horizon = slots * t
  local wait = 0
  if tatms > now or (tatms == now and tatsteps > 0) then wait = (tatms - now) * k + tatsteps end
  local after = wait + cost * t
  local q = floordiv(after, k)
  local ttl = ceildiv(after, k)
  local nextstate = fmt(now + q) .. ':' .. fmt(after - q * k)
  local left = floordiv(math.max(0, horizon - wait), t)
  if cost > slots then return never(left, ceildiv(wait, k), ttl, nextstate) end
  if after > horizon then return deny(ceildiv(after - horizon, k), left, ceildiv(wait, k), ttl, nextstate) end
  local delay = 0
  if shape == 1 then delay = ceildiv(wait, k) end
  return admit(floordiv(horizon - after, t), ttl, ttl, delay, nextstate)
end
