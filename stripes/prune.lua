-- prune.lua: drop sealed generations from the layout document, once nothing can need them.
--
-- KEYS[1]  the layout hash "<prefix>{<name>}:layout" (one key, one slot)
-- ARGV[1]  the version the caller read
-- ARGV[2]  the new layout document (JSON written by the Go code), starting at generation ARGV[3]
-- ARGV[3]  the first generation kept: every older one is folded and its stripes expired
--
-- Reply: the new version, or 0 if the stored version differs (nothing written).
--
-- Invariant: field "pruned" only grows and names the newest dropped generation; fold.lua
-- refuses to fold a generation at or below it, so dropping "folded:<gen>" can never let a
-- late sealer fold a generation twice. base is not touched. Dropping generation 1 drops the
-- fields of its stripe when it was a home generation (g, n, i, v, maxt, end, sealed, d<r>;
-- see home.lua): it is sealed and folded, and the document no longer names it.

local layout = KEYS[1]
if type(ARGV[1]) ~= 'string' or not string.match(ARGV[1], '^%d+$') or #ARGV[1] > 19 then
  return redis.error_reply('ERR stripes: bad version')
end
if type(ARGV[2]) ~= 'string' or string.sub(ARGV[2], 1, 1) ~= '{' or not pcall(cjson.decode, ARGV[2]) then
  return redis.error_reply('ERR stripes: bad layout document')
end
if type(ARGV[3]) ~= 'string' or not string.match(ARGV[3], '^[1-9]%d*$') or #ARGV[3] > 15 then
  return redis.error_reply('ERR stripes: bad first generation')
end
local first = tonumber(ARGV[3])
local ver = redis.call('HGET', layout, 'ver') or '0'
if ver ~= ARGV[1] then return 0 end
local pruned = tonumber(redis.call('HGET', layout, 'pruned') or '0')
if first - 1 < pruned then return redis.error_reply('ERR stripes: pruned generations cannot return') end
for _, f in ipairs(redis.call('HKEYS', layout)) do
  local g = string.match(f, '^folded:(%d+)$') or string.match(f, '^expiring:(%d+)$')
  if g and tonumber(g) < first then redis.call('HDEL', layout, f) end
  if first > 1 and string.match(f, '^d%d+$') then redis.call('HDEL', layout, f) end
end
if first > 1 then redis.call('HDEL', layout, 'g', 'n', 'i', 'v', 'maxt', 'end', 'sealed') end
redis.call('HSET', layout, 'doc', ARGV[2], 'pruned', string.format('%d', first - 1))
return redis.call('HINCRBY', layout, 'ver', 1)
