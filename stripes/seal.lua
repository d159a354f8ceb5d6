-- seal.lua: seal one stripe of an old generation and return its final value, idempotently.
--
-- KEYS[1]  the stripe hash "<prefix>{<tag>}:<name>:<gen>:<i>" (one key, one slot)
-- ARGV[1]  generation
--
-- Reply: the stripe's value as a decimal string (exact int64), the same on every call.
-- Error if the stripe is missing or of another generation.
--
-- Invariant: once sealed, add.lua refuses every event in this stripe, so the value returned
-- here is final: a seal round that crashes before folding and runs again folds the same sum.

local stripe = KEYS[1]
if type(ARGV[1]) ~= 'string' or not string.match(ARGV[1], '^%d+$') or #ARGV[1] > 19 then
  return redis.error_reply('ERR stripes: bad generation')
end
local st = redis.call('HMGET', stripe, 'g', 'v')
if not st[1] then return redis.error_reply('ERR stripes: stripe key missing') end
if st[1] ~= ARGV[1] then return redis.error_reply('ERR stripes: stripe key holds generation ' .. st[1]) end
redis.call('HSET', stripe, 'sealed', '1')
return st[2]
