-- close.lua: fix the boundary of one stripe of a closing generation, idempotently.
--
-- KEYS[1]  the stripe hash "<prefix>{<tag>}:<name>:<gen>:<i>" (one key, one slot)
-- ARGV[1]  generation
-- ARGV[2]  proposed boundary B, Unix milliseconds (the next generation's start)
--
-- Reply: the stripe's boundary: max(B, latest accepted event time + 1) the first time,
-- the stored boundary afterwards. Error if the stripe is missing or of another generation.
--
-- Invariant: from this point on, events routed by time with Event.Time >= boundary are
-- redirected to the next generation, and every event this stripe ever accepted by time has
-- Event.Time < boundary. So an event's generation never changes between its attempts.

local stripe = KEYS[1]
local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 19 then return nil end
  return tonumber(s)
end
local gen, b = int(ARGV[1]), int(ARGV[2])
if not gen or gen < 1 then return redis.error_reply('ERR stripes: bad generation') end
if not b then return redis.error_reply('ERR stripes: bad boundary') end

local st = redis.call('HMGET', stripe, 'g', 'end', 'maxt')
if not st[1] then return redis.error_reply('ERR stripes: stripe key missing') end
if tonumber(st[1]) ~= gen then return redis.error_reply('ERR stripes: stripe key holds generation ' .. st[1]) end
if st[2] then return tonumber(st[2]) end
local e = b
if st[3] and tonumber(st[3]) + 1 > e then e = tonumber(st[3]) + 1 end
redis.call('HSET', stripe, 'end', string.format('%.0f', e))
return e
