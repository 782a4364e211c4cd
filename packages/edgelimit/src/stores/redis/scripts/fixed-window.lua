-- fixed-window.lua: fixed window, REFERENCE §2 (mirrors src/core/fixed-window.ts).
-- A template section of the limiter's script (main.lua): `$name` is this rule's own local, COST
-- the cost being decided, `now` the decision's time. The decide section sets $code, $rem, $reset,
-- $x (see main.lua's reply) and $ttl (its write's PX); the write section stores an admission
-- and sets err when Redis refuses a write.
-- KEYS: $key, a string "windowIndex:count".
--@params limit w
--@read
local s = redis.pcall('GET', $key)
$sk, $sc = 0, 0
if s then
  if type(s) == 'table' then
    err = s.err
  else
    -- A value that does not parse (another algorithm's state after a change, say) is a fresh key.
    local k, c = string.match(s, '^(%-?%d+):(%-?%d+)$')
    if k then $sk, $sc = tonumber(k), tonumber(c) end
  end
end
--@decide
local w, limit = $w, $limit
-- A clock stepping back stays in the newest window charged: a lagging clock admits no more.
local k = math.floor(now / w)
if $sk > k then k = $sk end
local count = 0
if $sk == k then count = $sc end
local toend = (k + 1) * w - now
local after = count + COST
$k, $after = k, after
local ttl = 0
if after > 0 then ttl = toend end
$ttl = ttl
-- A forced charge (a sync of counts admitted elsewhere) can take count past the limit.
local left = limit - count
if left < 0 then left = 0 end
if COST > limit then
  local reset = 0
  if count > 0 then reset = toend end
  $code, $rem, $reset, $x = 2, left, reset, -1
elseif after > limit then
  $code, $rem, $reset, $x = 1, left, toend, toend
else
  $code, $rem, $reset, $x = 0, limit - after, ttl, 0
end
--@write
err = failed(redis.pcall('SET', $key, string.format('%d:%d', $k, $after), 'PX', $ttl + slack))
