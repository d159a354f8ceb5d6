-- home.lua: create the home record of a counter of one stripe, unless its layout key exists.
--
-- KEYS[1]  the layout hash "<prefix>{<name>}:layout" (one key, one slot)
-- ARGV[1]  the birth token (16 hex digits from crypto/rand)
-- ARGV[2]  the dedup settings "<window ms>:<slices>:<bits>", or "" for the package's
--          defaults (no field written)
--
-- Reply: 1 created, 0 the key exists (nothing written). Every layout record of every version
-- has field "ver" (cas.lua writes it with the document), so HSETNX of "ver" tells, in the
-- commands the package's ACL rule already grants.
--
-- A home record is the layout hash of a counter created with one stripe and never resized:
-- no document, "ver" = "home", and the one stripe's fields (g, v; add.lua adds maxt and
-- d<r>; no n nor i, which nothing reads) in the same hash, so a cold counter costs one hash
-- and its dedup sets "<KEYS[1]>:e:<slice>:<bucket>" (same hash tag, same slot). The first Resize writes the
-- document beside those fields (cas.lua), which then name generation 1 "home".
--
-- Invariant: the layout key decides where a counter's records live, once: whoever writes it
-- first (this script, or cas.lua creating a document from version "0") makes the other
-- fail, so every process, of this version or the one before, agrees on the format or
-- refuses the counter (that version parses "home" as no version: ErrLayout).

local layout = KEYS[1]
if type(ARGV[1]) ~= 'string' or not string.match(ARGV[1], '^%x+$') or #ARGV[1] > 64 then
  return redis.error_reply('ERR stripes: bad birth token')
end
if type(ARGV[2]) ~= 'string' or ARGV[2] ~= '' and not string.match(ARGV[2], '^%d+:%d+:%d+$') or #ARGV[2] > 40 then
  return redis.error_reply('ERR stripes: bad dedup settings')
end
if redis.call('HSETNX', layout, 'ver', 'home') == 0 then return 0 end
redis.call('HSET', layout, 'g', '1', 'v', '0', 'born', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', layout, 'dedup', ARGV[2]) end
return 1
