-- meter.lua: token bucket and policing leaky bucket, REFERENCE §2 (mirrors src/core/bucket.ts).
-- The level (missing tokens, or fill) is kept in fixed-point steps: `unit` steps per token and
-- `perMs` steps drained per ms, so refills are exact.
-- KEYS: the rule's state key (a string "levelSteps:lastMs").
-- ARGV (rule params): capacity, unit, perMs.

local function meter(key, p, now, cost)
  local capacity, unit, perms = p[1], p[2], p[3]
  local r = row(key, 2)
  local stored, last = r[1], r[2]
  local at = now
  if stored > 0 and last > now then at = last end
  local skew = at - now
  local level = 0
  if stored > 0 then
    local drained = (at - last) * perms
    if drained < stored then level = stored - drained end
  end
  local full = capacity * unit
  local after = level + cost * unit
  local ttl = skew + ceildiv(after, perms)
  local nextstate = fmt(after) .. ':' .. fmt(at)
  local left = floordiv(math.max(0, full - level), unit)
  if cost > capacity then return never(left, skew + ceildiv(level, perms), ttl, nextstate) end
  if after > full then
    return deny(skew + ceildiv(after - full, perms), left, skew + ceildiv(level, perms), ttl, nextstate)
  end
  return admit(floordiv(full - after, unit), ttl, ttl, 0, nextstate)
end
