-- holders.lua: read who holds some migration locks, without changing anything.
--
-- All keys carry the journal hash tag "{<prefix>:table}", so they share one slot in the
-- control Redis.
-- KEYS[1..] STRING unit locks (create.lua's KEYS[2] and KEYS[4..])
-- ARGV  none
-- Reply: {"ok", holder...}: per key, the ID of the migration holding it, "" for a free lock.
-- Invariant: read-only; create.lua stays the one step that takes a lock, this only lets a
--   Start name a holder before it reads the shards.

if #KEYS < 1 or #ARGV ~= 0 then
  return redis.error_reply("ERR migrate holders: want at least 1 key and no arguments")
end
local out = {"ok"}
for i = 1, #KEYS do
  out[#out + 1] = redis.call("GET", KEYS[i]) or ""
end
return out
