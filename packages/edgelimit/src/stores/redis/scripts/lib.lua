-- lib.lua: exact integer helpers shared by every algorithm (all values are integers below 2^53).
-- Lua numbers are doubles: divisions are corrected with exact products, and numbers are written
-- with '%.0f' (tostring would round to 14 significant digits).

local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function ceildiv(a, b)
  local q = floordiv(a, b)
  if q * b == a then return q end
  return q + 1
end

local function fmt(x)
  return string.format('%.0f', x)
end

-- A numeric state row is stored as one string "a:b[:c]"; a missing key is the fresh row (zeros).
local function row(key, width)
  local s = redis.call('GET', key)
  local r = {}
  local i = 1
  if s then
    for part in string.gmatch(s, '[^:]+') do
      r[i] = tonumber(part)
      i = i + 1
    end
  end
  for j = i, width do r[j] = 0 end
  return r
end

-- Verdicts: allowed (1/0), remaining, resetAfterMs, retryAfterMs (-1 = never), delayMs,
-- reason (0 none, 1 limit-exceeded, 2 cost-exceeds-limit), ttlMs, next state. Like the core,
-- every verdict carries the state after charging the cost, stored on admission or when forced.
local function never(remaining, reset, ttl, nextstate)
  return { 0, remaining, reset, -1, 0, 2, ttl, nextstate }
end

local function deny(retry, remaining, reset, ttl, nextstate)
  return { 0, remaining, reset, retry, 0, 1, ttl, nextstate }
end

local function admit(remaining, reset, ttl, delay, nextstate)
  return { 1, remaining, reset, 0, delay, 0, ttl, nextstate }
end
