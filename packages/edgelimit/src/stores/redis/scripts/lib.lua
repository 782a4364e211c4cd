-- lib.lua: exact integer helpers shared by the algorithms (all values are integers below 2^53).
-- Lua numbers are doubles: divisions are corrected with exact products. Numbers go to Redis as
-- redis.call arguments (Redis writes them with %.17g: exact for integers below 2^53) or through
-- string.format('%d') (exact; tostring would round to 14 significant digits).
-- script.ts copies a helper into a script only when the script's code names it: each helper is
-- one section, from its `--@helper <name>` line to the next.

--@helper floordiv
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

--@helper ceildiv
local function ceildiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  if q * b == a then return q end
  return q + 1
end

--@helper sw_reset
-- Sliding window: ms until the state equals a fresh key (sliding-window.lua).
local function sw_reset(w, start, now, cur, prev)
  if cur > 0 then return start + w + (w - ceildiv(w, cur) + 1) - now end
  if prev > 0 then
    local r = start + (w - ceildiv(w, prev) + 1) - now
    if r > 0 then return r end
  end
  return 0
end

--@helper failed
-- A write's error text, or nil. Writes go through redis.pcall: a write Redis refuses (full
-- memory, an ACL) fails its own decision, not the whole batch (main.lua).
local function failed(reply)
  if type(reply) == 'table' then return reply.err end
  return nil
end

--@helper ttlerr
-- Why Redis would refuse `ms` as a PX, or nil: it takes a positive integer, and Lua sends a
-- number of 1e17 or more in exponent form (and one above 2^53 rounded). Checked for every rule
-- of a decision before its first write, so such a decision fails and writes nothing.
local function ttlerr(ms)
  if ms >= 1 and ms <= 9007199254740991 and ms % 1 == 0 then return nil end
  return 'TTL out of range: ' .. string.format('%.17g', ms)
end
