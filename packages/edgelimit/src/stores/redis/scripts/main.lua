-- main.lua: every rule of one limiter for one client key, in one atomic call, all-or-nothing.
-- Generated above this file: the algorithms' functions and RULES[i] = { decide = fn, n = params,
-- commit = fn or nil } for rule i.
-- KEYS[i]: rule i's state key; all carry the client's hash tag, so they share one cluster slot.
-- ARGV[1]: now in ms, or '' to use the server's TIME (no clock skew between edge locations).
-- ARGV[2]: cost; 0 is a peek (decides, writes nothing).
-- ARGV[3]: shadow rules, one character per rule ('1' = shadow: its denial does not block, and it is
--          charged only when it admits); '' when none.
-- ARGV[4]: '1' to charge every rule whatever it decides (syncing counts admitted elsewhere).
-- ARGV[5..]: each rule's params in order, RULES[i].n numbers each (see the algorithm's file).
-- Returns 6 integers per rule: allowed (1/0), remaining, resetAfterMs, retryAfterMs (-1: never),
-- delayMs, reason (0 none, 1 limit-exceeded, 2 cost-exceeds-limit).

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local cost = tonumber(ARGV[2])
local shadow = ARGV[3]
local force = ARGV[4] == '1'
local verdicts, params = {}, {}
local allowed = true
local a = 5
for i = 1, #KEYS do
  local p = {}
  for j = 1, RULES[i].n do
    p[j] = tonumber(ARGV[a])
    a = a + 1
  end
  params[i] = p
  verdicts[i] = RULES[i].decide(KEYS[i], p, now, cost)
  if verdicts[i][1] == 0 and string.sub(shadow, i, i) ~= '1' then allowed = false end
end
if cost > 0 then
  for i = 1, #KEYS do
    local v = verdicts[i]
    if not allowed and not force then
      -- Nothing is charged: an admitting rule reports its state as it stands.
      if v[1] == 1 then verdicts[i] = RULES[i].decide(KEYS[i], params[i], now, 0) end
    elseif v[1] == 0 and not force then
      -- A shadow rule that denies is not charged, exactly as if it were enforced.
    elseif RULES[i].commit then
      RULES[i].commit(KEYS[i], now, params[i][2], v[8], v[7])
    else
      -- Every write carries a TTL: the state equals a fresh key once it passes.
      redis.call('SET', KEYS[i], v[8], 'PX', fmt(v[7]))
    end
  end
end
local out = {}
for i = 1, #KEYS do
  for j = 1, 6 do out[#out + 1] = verdicts[i][j] end
end
return out
