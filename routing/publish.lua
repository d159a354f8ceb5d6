-- publish.lua: compare-and-set publication of a route table in the control Redis.
--
-- KEYS:
--   1 table  HASH {gen, table}: the current generation and its JSON (one key, one slot)
-- ARGV:
--   1 gen      generation of the new table (integer >= 1)
--   2 table    the table's JSON
--   3 channel  pub/sub channel on which the generation is announced
-- Reply: {"ok", gen} when the table is now current (including the retry of a publication
--   whose reply was lost), {"conflict", current} when gen is not exactly current + 1.
-- Invariant: generations grow by exactly one and never repeat; a generation is never
--   re-published with other content.

if #KEYS ~= 1 or #ARGV ~= 3 then
  return redis.error_reply("ERR routing publish: want 1 key and 3 arguments")
end
if type(ARGV[1]) ~= "string" or not string.match(ARGV[1], "^%d+$") or tonumber(ARGV[1]) < 1 then
  return redis.error_reply("ERR routing publish: gen must be an integer >= 1")
end
if ARGV[2] == "" then return redis.error_reply("ERR routing publish: empty table") end
if ARGV[3] == "" then return redis.error_reply("ERR routing publish: empty channel") end
local cur = redis.call("HMGET", KEYS[1], "gen", "table")
local cgen = cur[1] or "0"
if cgen == ARGV[1] and cur[2] == ARGV[2] then
  return {"ok", cgen}
end
if tonumber(ARGV[1]) ~= tonumber(cgen) + 1 then
  return {"conflict", cgen}
end
redis.call("HSET", KEYS[1], "gen", ARGV[1], "table", ARGV[2])
redis.call("PUBLISH", ARGV[3], ARGV[1])
return {"ok", ARGV[1]}
