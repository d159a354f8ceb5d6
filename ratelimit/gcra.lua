-- gcra.lua: admit cost requests of one key by the generic cell rate algorithm, atomically.
--
-- KEYS[1]  "<prefix>{<hash>}:g:<key>": the key's theoretical arrival time (TAT), a string
--          of microseconds on this server's clock. One key, so one slot.
-- ARGV[1]  burst: cells admitted at once from idle, 1..2^40
-- ARGV[2]  rate: cells per period, 1..2^40
-- ARGV[3]  period, microseconds, 1..8.64e10
-- ARGV[4]  cost: cells asked for, 1..2^40
-- Reply: {status, remaining, retry_after_us, reset_after_us, now_us}
--   {'ok', ...}      admitted; TAT advanced by cost emission intervals
--   {'denied', ...}  not admitted; nothing written; retry_after_us is -1 when cost > burst
--   bad arguments: an error 'ERR ratelimit: <what>', before any write
-- Invariant: with T = period/rate, a request is admitted only if TAT + cost·T - burst·T
-- <= now, and then TAT = max(TAT, now) + cost·T. Hence in any interval of length x at most
-- burst + x/T cells are admitted. The script is its own idempotence unit: it either
-- advances TAT once or writes nothing (a retried call is a new request, as with any
-- Exact-mode call; see the package doc).
local key = KEYS[1]

local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end

local burst = int(ARGV[1])
local rate = int(ARGV[2])
local period = int(ARGV[3])
local cost = int(ARGV[4])
if not burst or burst < 1 or burst > 1099511627776 then return redis.error_reply('ERR ratelimit: bad burst') end
if not rate or rate < 1 or rate > 1099511627776 then return redis.error_reply('ERR ratelimit: bad rate') end
if not period or period < 1 or period > 86400000000 then return redis.error_reply('ERR ratelimit: bad period') end
if not cost or cost < 1 or cost > 1099511627776 then return redis.error_reply('ERR ratelimit: bad cost') end

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local t = period / rate
local tau = burst * t

local tat = tonumber(redis.call('GET', key) or '') or now
if tat < now then tat = now end

if cost > burst then
  return {'denied', math.max(0, math.floor((now - (tat - tau)) / t)), -1, math.ceil(tat - now), now}
end
local newtat = tat + cost * t
local diff = now - (newtat - tau)
if diff < 0 then
  return {'denied', math.max(0, math.floor((now - (tat - tau)) / t)), math.ceil(-diff), math.ceil(tat - now), now}
end
redis.call('SET', key, string.format('%.17g', newtat), 'PX', math.ceil((newtat - now) / 1000) + 1)
return {'ok', math.floor(diff / t), -1, math.ceil(newtat - now), now}
