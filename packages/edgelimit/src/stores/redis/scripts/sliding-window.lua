-- sliding-window.lua: sliding-window counter, REFERENCE §2 (mirrors src/core/sliding-window.ts).
-- KEYS: the rule's state key (a string "windowIndex:cur:prev").
-- ARGV (rule params): limit, windowMs.

local function sw_reset(w, start, now, cur, prev)
  if cur > 0 then return start + w + (w - ceildiv(w, cur) + 1) - now end
  if prev > 0 then return math.max(0, start + (w - ceildiv(w, prev) + 1) - now) end
  return 0
end

local function sliding_window(key, p, now, cost)
  local limit, w = p[1], p[2]
  local r = row(key, 3)
  local k = math.floor(now / w)
  local start = k * w
  local e = now - start
  local cur, prev = 0, 0
  if r[1] == k then
    cur, prev = r[2], r[3]
  elseif r[1] == k - 1 then
    prev = r[2]
  end
  local estimate = cur
  if prev > 0 then estimate = cur + floordiv(prev * (w - e), w) end
  local after = cur + cost
  local ttl = sw_reset(w, start, now, after, prev)
  local nextstate = fmt(k) .. ':' .. fmt(after) .. ':' .. fmt(prev)
  if cost > limit then
    return never(math.max(0, limit - estimate), sw_reset(w, start, now, cur, prev), ttl, nextstate)
  end
  if estimate + cost > limit then
    local room = limit - cost - cur
    local at
    if room >= 0 then
      at = start + w - ceildiv((room + 1) * w, prev) + 1
    else
      at = start + w + math.max(0, w - ceildiv((limit - cost + 1) * w, cur) + 1)
    end
    return deny(at - now, math.max(0, limit - estimate), sw_reset(w, start, now, cur, prev), ttl, nextstate)
  end
  return admit(limit - estimate - cost, ttl, ttl, 0, nextstate)
end
