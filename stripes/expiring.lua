-- expiring.lua: mark a folded generation's sealed stripes as given their TTL, in an existing
-- layout record only.
--
-- KEYS[1]  the layout hash "<prefix>{<name>}:layout" (one key, one slot)
-- ARGV[1]  the generation, a positive decimal integer
-- ARGV[2]  when its stripes were given their TTL, Unix milliseconds
--
-- Reply: 1 when marked, 0 when the layout record does not exist (nothing written).
--
-- Invariant: this never creates a layout record: a record lost while a Seal ran stays lost
-- (and is reported as vanished) rather than coming back as a stray hash of one field.

local layout = KEYS[1]
if type(ARGV[1]) ~= 'string' or not string.match(ARGV[1], '^[1-9]%d*$') or #ARGV[1] > 15 then
  return redis.error_reply('ERR stripes: bad generation')
end
if type(ARGV[2]) ~= 'string' or not string.match(ARGV[2], '^%d+$') or #ARGV[2] > 15 then
  return redis.error_reply('ERR stripes: bad time')
end
if not redis.call('HGET', layout, 'ver') then return 0 end
redis.call('HSET', layout, 'expiring:' .. ARGV[1], ARGV[2])
return 1
