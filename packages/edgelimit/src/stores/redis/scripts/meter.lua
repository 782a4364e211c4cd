-- meter.lua: token bucket and policing leaky bucket, REFERENCE §2 (mirrors src/core/bucket.ts).
-- The level (missing tokens, or fill) is kept in fixed-point steps: `unit` steps per token and
-- `perms` steps drained per ms, so refills are exact.
-- A template section of the limiter's script (main.lua): `$name` is this rule's own local, COST
-- the cost being decided, `now` the decision's time. The decide section sets $code, $rem, $reset,
-- $x (see main.lua's reply) and $ttl (its write's PX); the write section stores an admission
-- and sets err when Redis refuses a write.
-- KEYS: $key, a string "levelSteps:lastMs".
--@params capacity unit perms
--@read
local s = redis.pcall('GET', $key)
$stored, $last = 0, 0
if s then
  if type(s) == 'table' then
    err = s.err
  else
    -- A value that does not parse (another algorithm's state after a change, say) is a fresh key.
    local l, t = string.match(s, '^(%-?%d+):(%-?%d+)$')
    if l then $stored, $last = tonumber(l), tonumber(t) end
  end
end
--@decide
local capacity, unit, perms = $capacity, $unit, $perms
local stored, last = $stored, $last
local at = now
if stored > 0 and last > now then at = last end
local skew = at - now
local level = 0
if stored > 0 then
  local drained = (at - last) * perms
  if drained < stored then level = stored - drained end
end
local full = capacity * unit
local after = level + COST * unit
$after, $at = after, at
$ttl = skew + ceildiv(after, perms)
local left = full - level
if left < 0 then left = 0 end
left = floordiv(left, unit)
if COST > capacity then
  $code, $rem, $reset, $x = 2, left, skew + ceildiv(level, perms), -1
elseif after > full then
  $code, $rem, $reset, $x = 1, left, skew + ceildiv(level, perms), skew + ceildiv(after - full, perms)
else
  $code, $rem, $reset, $x = 0, floordiv(full - after, unit), $ttl, 0
end
--@write
err = failed(redis.pcall('SET', $key, string.format('%d:%d', $after, $at), 'PX', $ttl + slack))
