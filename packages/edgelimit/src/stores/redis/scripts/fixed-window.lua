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
  if cost > limit then
    local reset = 0
    if count > 0 then reset = toend end
    return never(limit - count, reset)
  end
  local after = count + cost
  if after > limit then return deny(toend, limit - count, toend) end
  local reset = 0
  if after > 0 then reset = toend end
  return admit(limit - after, reset, reset, 0, fmt(k) .. ':' .. fmt(after))
end
