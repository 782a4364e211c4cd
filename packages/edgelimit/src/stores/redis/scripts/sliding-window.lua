-- sliding-window.lua: sliding-window counter, REFERENCE §2 (mirrors src/core/sliding-window.ts).
-- A template section of the limiter's script (main.lua): `$name` is this rule's own local, COST
-- the cost being decided, `now` the decision's time. The decide section sets $code, $rem, $reset,
-- $x (see main.lua's reply) and $ttl (its write's PX); the write section stores an admission
-- and sets err when Redis refuses a write.
-- KEYS: $key, a string "windowIndex:cur:prev".
--@params limit w
--@read
local s = redis.pcall('GET', $key)
$sk, $sc, $sp = 0, 0, 0
if s then
  if type(s) == 'table' then
    err = s.err
  else
    -- A value that does not parse (another algorithm's state after a change, say) is a fresh key.
    local k, c, p = string.match(s, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
    if k then $sk, $sc, $sp = tonumber(k), tonumber(c), tonumber(p) end
  end
end
--@decide
local w, limit = $w, $limit
-- A clock stepping back is evaluated at the start of the newest window charged (e = 0): a lagging
-- clock admits no more.
local k = math.floor(now / w)
if $sk > k then k = $sk end
local start = k * w
local e = now - start
if e < 0 then e = 0 end
local cur, prev = 0, 0
if $sk == k then
  cur, prev = $sc, $sp
elseif $sk == k - 1 then
  prev = $sc
end
local estimate = cur
if prev > 0 then estimate = cur + floordiv(prev * (w - e), w) end
local after = cur + COST
$k, $after, $prev = k, after, prev
$ttl = sw_reset(w, start, now, after, prev)
local left = limit - estimate
if left < 0 then left = 0 end
if COST > limit then
  $code, $rem, $reset, $x = 2, left, sw_reset(w, start, now, cur, prev), -1
elseif estimate + COST > limit then
  local room = limit - COST - cur
  local at
  if room >= 0 then
    at = start + w - ceildiv((room + 1) * w, prev) + 1
  else
    at = w - ceildiv((limit - COST + 1) * w, cur) + 1
    if at < 0 then at = 0 end
    at = start + w + at
  end
  $code, $rem, $reset, $x = 1, left, sw_reset(w, start, now, cur, prev), at - now
else
  $code, $rem, $reset, $x = 0, limit - estimate - COST, $ttl, 0
end
--@write
err = failed(redis.pcall('SET', $key, string.format('%d:%d:%d', $k, $after, $prev), 'PX', $ttl + slack))
