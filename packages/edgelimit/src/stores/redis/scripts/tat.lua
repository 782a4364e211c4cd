-- tat.lua: GCRA and the shaping leaky bucket, REFERENCE §2 (mirrors src/core/tat.ts).
-- Time is kept in steps of 1/k ms so that the emission interval T = t steps is exact; the TAT is
-- tatMs + tatSteps / k.
-- A template section of the limiter's script (main.lua): `$name` is this rule's own local, COST
-- the cost being decided, `now` the decision's time. The decide section sets $code, $rem, $reset,
-- $x (see main.lua's reply) and $ttl (its write's PX); the write section stores an admission
-- and sets err when Redis refuses a write.
-- KEYS: $key, a string "tatMs:tatSteps".
--@params k t slots shape
--@read
local s = redis.pcall('GET', $key)
$tatms, $tatsteps = 0, 0
if s then
  if type(s) == 'table' then
    err = s.err
  else
    -- A value that does not parse (another algorithm's state after a change, say) is a fresh key.
    local ms, steps = string.match(s, '^(%-?%d+):(%-?%d+)$')
    if ms then $tatms, $tatsteps = tonumber(ms), tonumber(steps) end
  end
end
--@decide
local k, t = $k, $t
local tatms, tatsteps = $tatms, $tatsteps
local horizon = $slots * t
local wait = 0
if tatms > now or (tatms == now and tatsteps > 0) then wait = (tatms - now) * k + tatsteps end
local after = wait + COST * t
local q = floordiv(after, k)
$nms, $nsteps = now + q, after - q * k
$ttl = ceildiv(after, k)
local left = horizon - wait
if left < 0 then left = 0 end
left = floordiv(left, t)
if COST > $slots then
  $code, $rem, $reset, $x = 2, left, ceildiv(wait, k), -1
elseif after > horizon then
  $code, $rem, $reset, $x = 1, left, ceildiv(wait, k), ceildiv(after - horizon, k)
else
  local delay = 0
  if $shape == 1 then delay = ceildiv(wait, k) end
  $code, $rem, $reset, $x = 0, floordiv(horizon - after, t), $ttl, delay
end
--@write
err = failed(redis.pcall('SET', $key, string.format('%d:%d', $nms, $nsteps), 'PX', $ttl + slack))
