-- fold.lua: add a sealed generation's total to the base value exactly once.
--
-- KEYS[1]  the layout hash "<prefix>{<name>}:layout" (one key, one slot)
-- ARGV[1]  generation (the seal ID: one fold per generation)
-- ARGV[2]  the generation's total: the sum of its sealed stripes, a decimal int64
--
-- Reply: {1, total} folded now; {0, total} already folded earlier with that total;
--        {2, 0} the generation was folded and then pruned (see prune.lua): nothing to do.
--
-- Invariant: field "folded:<gen>" and the base increment are written together, so a
-- generation's total enters the base exactly once however often the fold is retried.

local layout = KEYS[1]
if type(ARGV[1]) ~= 'string' or not string.match(ARGV[1], '^[1-9]%d*$') or #ARGV[1] > 19 then
  return redis.error_reply('ERR stripes: bad generation')
end
if type(ARGV[2]) ~= 'string' or not string.match(ARGV[2], '^%-?%d+$') or #ARGV[2] > 20 then
  return redis.error_reply('ERR stripes: bad total')
end
if not redis.call('HGET', layout, 'doc') then return redis.error_reply('ERR stripes: layout missing') end
if tonumber(ARGV[1]) <= tonumber(redis.call('HGET', layout, 'pruned') or '0') then return {2, 0} end
local done = redis.call('HGET', layout, 'folded:' .. ARGV[1])
if done then return {0, done} end
redis.call('HINCRBY', layout, 'base', ARGV[2])
redis.call('HSET', layout, 'folded:' .. ARGV[1], ARGV[2])
redis.call('HINCRBY', layout, 'ver', 1)
return {1, ARGV[2]}
