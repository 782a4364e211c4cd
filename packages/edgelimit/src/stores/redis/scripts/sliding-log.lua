-- sliding-log.lua: sliding-window log, REFERENCE §2 (mirrors src/core/sliding-log.ts).
-- State: one sorted set per key; score = admission time, member "ts:cost" (one member per
-- instant, costs at the same instant are merged). An entry counts while now - ts < W.
-- A template section of the limiter's script (main.lua): `$name` is this rule's own local, COST
-- the cost being decided, `now` the decision's time. The decide section sets $code, $rem, $reset,
-- $x (see main.lua's reply) and $ttl (its write's PX); the write section stores an admission
-- and sets err when Redis refuses a write.
-- KEYS: $key, a sorted set.
--@params limit w
--@read
-- The counted entries as parallel arrays of times and costs, oldest first.
local members = redis.pcall('ZRANGEBYSCORE', $key, '(' .. string.format('%d', now - $w), '+inf')
$times, $ecosts, $n = {}, {}, 0
if members.err then
  err = members.err
else
  local times, costs, n = $times, $ecosts, 0
  for i = 1, #members do
    -- A member that does not parse counts nothing.
    local ts, c = string.match(members[i], '^(%d+):(%d+)$')
    if ts then
      n = n + 1
      times[n] = tonumber(ts)
      costs[n] = tonumber(c)
    end
  end
  $n = n
end
--@decide
local limit, w = $limit, $w
local times, costs, n = $times, $ecosts, $n
local counted = 0
for i = 1, n do counted = counted + costs[i] end
local reset = 0
if counted > 0 then reset = times[n] + w - now end
local ttl = reset
if COST > 0 and w > reset then ttl = w end
$ttl = ttl
-- A clock stepping back still appends in order: the entry joins the newest instant.
$at, $ecost, $old = now, COST, nil
if n > 0 and times[n] >= now then
  $at, $ecost, $old = times[n], costs[n] + COST, string.format('%d:%d', times[n], costs[n])
end
local left = limit - counted
if left < 0 then left = 0 end
if COST > limit then
  $code, $rem, $reset, $x = 2, left, reset, -1
elseif counted + COST > limit then
  -- The request fits once the oldest entries holding more than limit - COST have left.
  local i = 0
  while counted > limit - COST do
    i = i + 1
    counted = counted - costs[i]
  end
  $code, $rem, $reset, $x = 1, left, reset, times[i] + w - now
else
  $code, $rem, $reset, $x = 0, limit - counted - COST, ttl, 0
end
--@write
-- ZADD first: of these writes it is the one that full memory refuses, and Redis refuses only a
-- script's first write that needs memory, so a refused admission changes nothing. Once it is in,
-- the TTL is set whatever fails between.
err = failed(redis.pcall('ZADD', $key, $at, string.format('%d:%d', $at, $ecost)))
if not err then
  if $old then err = failed(redis.pcall('ZREM', $key, $old)) end
  err = err or failed(redis.pcall('ZREMRANGEBYSCORE', $key, '-inf', now - $w))
  err = failed(redis.pcall('PEXPIRE', $key, $ttl + slack)) or err
end
