-- fixed-window.lua: fixed window, REFERENCE §2 (mirrors src/core/fixed-window.ts).
-- KEYS: the rule's state key (a string "windowIndex:count").
-- ARGV (rule params): limit, windowMs.

local function fixed_window(key, p, now, cost)
  local limit, w = p[1], p[2]
  local r = row(key, 2)
  local k = math.floor(now / w)
  local count = 0
  if r[1] == k then count = r[2] end
  local toend = (k + 1) * w - now
  local after = count + cost
  local ttl = 0
  if after > 0 then ttl = toend end
  local nextstate = fmt(k) .. ':' .. fmt(after)
  local left = math.max(0, limit - count)
  if cost > limit then
    local reset = 0
    if count > 0 then reset = toend end
    return never(left, reset, ttl, nextstate)
  end
  if after > limit then return deny(toend, left, toend, ttl, nextstate) end
  return admit(limit - after, ttl, ttl, 0, nextstate)
end
