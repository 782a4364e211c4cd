-- sliding-log.lua: sliding-window log, REFERENCE §2 (mirrors src/core/sliding-log.ts).
-- State: one sorted set per key; score = admission time, member "ts:cost" (one member per
-- instant, costs at the same instant are merged). An entry counts while now - ts < W.
-- KEYS: the rule's state key (a sorted set).
-- ARGV (rule params): limit, windowMs.

-- The counted entries as parallel arrays of times and costs, oldest first.
local function log_entries(key, now, w)
  local members = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(now - w), '+inf')
  local times, costs = {}, {}
  for i, m in ipairs(members) do
    local ts, c = string.match(m, '^(%d+):(%d+)$')
    times[i] = tonumber(ts)
    costs[i] = tonumber(c)
  end
  return times, costs
end

local function sliding_log(key, p, now, cost)
  local limit, w = p[1], p[2]
  local times, costs = log_entries(key, now, w)
  local n = #times
  local counted = 0
  for i = 1, n do counted = counted + costs[i] end
  local reset = 0
  if counted > 0 then reset = times[n] + w - now end
  local ttl = reset
  if cost > 0 then ttl = math.max(w, reset) end
  -- A clock stepping back still appends in order: the entry joins the newest instant.
  local entry = { at = now, cost = cost }
  if n > 0 and times[n] >= now then
    entry = { at = times[n], cost = costs[n] + cost, old = fmt(times[n]) .. ':' .. fmt(costs[n]) }
  end
  if cost > limit then return never(math.max(0, limit - counted), reset, ttl, entry) end
  if counted + cost > limit then
    -- The request fits once the oldest entries holding more than limit - cost have left.
    local left = counted
    local i = 0
    while left > limit - cost do
      i = i + 1
      left = left - costs[i]
    end
    return deny(times[i] + w - now, math.max(0, limit - counted), reset, ttl, entry)
  end
  return admit(limit - counted - cost, ttl, ttl, 0, entry)
end

-- Stores an admission decided by sliding_log.
local function sliding_log_commit(key, now, w, entry, ttl)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - w))
  if entry.old then redis.call('ZREM', key, entry.old) end
  redis.call('ZADD', key, fmt(entry.at), fmt(entry.at) .. ':' .. fmt(entry.cost))
  redis.call('PEXPIRE', key, fmt(ttl))
end
