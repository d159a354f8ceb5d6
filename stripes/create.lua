-- create.lua: create one stripe of a generation, idempotently.
--
-- KEYS[1]  the stripe hash "<prefix>{<tag>}:<name>:<gen>:<i>" (one key, one slot)
-- ARGV[1]  generation
-- ARGV[2]  stripe count of the generation
-- ARGV[3]  stripe index
--
-- Reply: 1 created, 0 already present with the same generation; error if the key holds
-- another generation.
--
-- Invariant: a stripe is created with value 0 exactly once; re-running (a retried resize,
-- a lost reply) never resets a value.

local stripe = KEYS[1]
local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 19 then return nil end
  return tonumber(s)
end
local gen, n, i = int(ARGV[1]), int(ARGV[2]), int(ARGV[3])
if not gen or gen < 1 then return redis.error_reply('ERR stripes: bad generation') end
if not n or n < 1 or n > 4096 then return redis.error_reply('ERR stripes: bad stripe count') end
if not i or i >= n then return redis.error_reply('ERR stripes: bad stripe index') end

local g = redis.call('HGET', stripe, 'g')
if g then
  if tonumber(g) ~= gen then return redis.error_reply('ERR stripes: stripe key holds generation ' .. g) end
  return 0
end
redis.call('HSET', stripe, 'g', ARGV[1], 'n', ARGV[2], 'i', ARGV[3], 'v', '0')
return 1
