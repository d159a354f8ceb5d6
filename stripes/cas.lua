-- cas.lua: replace the layout document if nobody changed it since it was read.
--
-- KEYS[1]  the layout hash "<prefix>{<name>}:layout" (one key, one slot)
-- ARGV[1]  the version the caller read ("0" when the record did not exist, "1" for a home
--          record, see home.lua)
-- ARGV[2]  the new layout document (JSON written by the Go code)
--
-- Reply: the new version, or 0 if the stored version differs (nothing written).
--
-- Invariant: layout changes are serialized by version; base and folded:* fields are only
-- changed by fold.lua, never here. A home record ("ver" = "home") reads as version 1: the
-- document written over it (the first Resize) keeps the home stripe's fields and drops the
-- born and dedup fields, which the document holds from then on.

local layout = KEYS[1]
if type(ARGV[1]) ~= 'string' or not string.match(ARGV[1], '^%d+$') or #ARGV[1] > 19 then
  return redis.error_reply('ERR stripes: bad version')
end
if type(ARGV[2]) ~= 'string' or string.sub(ARGV[2], 1, 1) ~= '{' then
  return redis.error_reply('ERR stripes: bad layout document')
end
local ok = pcall(cjson.decode, ARGV[2])
if not ok then return redis.error_reply('ERR stripes: bad layout document') end
local ver = redis.call('HGET', layout, 'ver') or '0'
local home = ver == 'home'
if home then ver = '1' end
if ver ~= ARGV[1] then return 0 end
if home then
  redis.call('HDEL', layout, 'born', 'dedup')
  redis.call('HSET', layout, 'ver', '1')
end
local nv = redis.call('HINCRBY', layout, 'ver', 1)
redis.call('HSET', layout, 'doc', ARGV[2])
return nv
