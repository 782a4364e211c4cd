-- main.lua: a batch of decisions for one limiter, each deciding every rule of one client key
-- atomically and all-or-nothing, in the order given (exactly as if they were sent one by one).
-- script.ts generates the limiter's script from this template: each `--@<part>` line below is
-- replaced by that part of every rule (the algorithm files' sections), in rule order, and the
-- needed lib.lua helpers are put first. R = the limiter's rule count, P = its param count.
--
-- KEYS: R keys per decision, decision after decision (rule i of decision d is KEYS[(d-1)*R+i]);
--       the keys of one call share one cluster slot (one client key's hash tag per decision, and
--       on a Cluster the store batches only decisions whose tags share a slot).
-- ARGV[1]: '' to use the server's TIME for every decision of the call (no clock skew between
--          edge locations), 'c' when each decision carries its own time (client clock).
-- ARGV[2..P+1]: every rule's params in order (`--@params` of its algorithm file).
-- ARGV[P+2..]: per decision, its time in ms first when ARGV[1] is 'c', then its cost: '<cost>'
--          or '<cost>,<force>,<shadow>' where force '1' charges every enforced rule whatever it
--          decides (syncing counts admitted elsewhere) and shadow has one character per rule
--          ('1' = a shadow rule: its denial does not block, and it is charged only when it admits,
--          forced or not).
--          A cost of 0 is a peek: it decides and writes nothing.
-- Returns 4 integers per rule per decision: code (0 admitted, 1 limit-exceeded,
-- 2 cost-exceeds-limit), remaining, resetAfterMs, and retryAfterMs when denied (-1: never) or
-- delayMs when admitted. A decision whose key cannot be read (e.g. WRONGTYPE), or whose write
-- Redis refuses (full memory, a TTL out of range, an ACL), returns -1 and the error text as its
-- first rule's first two values, and the next decisions go on: reads and writes use redis.pcall,
-- so no error aborts the script (which would keep the writes of the decisions before it and fail
-- them all). Such a decision writes nothing: every TTL is checked before its first write, and
-- full memory refuses only a script's first write that needs memory (every write section starts
-- with one). Only a write refused after another write of the same decision keeps the ones before
-- it: an ACL that allows some of the commands or keys a decision writes (docs/stores/redis.md).

local now
local per = 1
-- Added to every TTL with a client clock: the state then outlives its last use by the client's
-- clock even when that clock runs behind the server's (which times the expiry) by up to 10 s.
-- Keeping a state past its TTL changes no decision: by then it decides like a fresh key.
local slack = 0
if ARGV[1] == 'c' then
  per = 2
  slack = 10000
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
--@params
local out, o = {}, 0
local a = ARGV_BASE
local b = 0
for _ = 1, (#ARGV - ARGV_BASE) / per do
  if per == 2 then
    a = a + 1
    now = tonumber(ARGV[a])
  end
  a = a + 1
  local spec = ARGV[a]
  local cost = tonumber(spec)
  local force, shadow = false, nil
  if not cost then
    local c, f, s = string.match(spec, '^(%d+),(%d),(%d*)$')
    cost = tonumber(c)
    force = f == '1'
    if s ~= '' then shadow = s end
  end
  local err
  --@read
  if not err then
    --@decide
    if cost > 0 then
      if not (ALLOWED) and not force then
        -- Nothing is charged: an admitting rule reports its state as it stands (a peek).
        --@redecide
      else
        -- A shadow rule that denies is not charged, exactly as if it were enforced. Every write
        -- carries a TTL: the state equals a fresh key once it passes. Every TTL is checked first.
        --@write
      end
    end
  end
  if err then
    out[o + 1] = -1
    out[o + 2] = err
    for j = o + 3, o + RULE_COUNT * 4 do out[j] = 0 end
  else
    --@emit
  end
  o = o + RULE_COUNT * 4
  b = b + RULE_COUNT
end
return out
