-- publish.lua: compare-and-set publication of a route table in the control Redis.
--
-- KEYS[1]  table  HASH {gen, table}: the current generation and its JSON (one key, one slot)
-- KEYS[2]  guard  optional HASH under the hash tag "{<table key>}" (so it shares the table's slot):
--                 the table is published only if its fields hold the values ARGV[4..] name
-- ARGV[1]  gen      generation of the new table (integer >= 1)
-- ARGV[2]  table    the table's JSON
-- ARGV[3]  channel  pub/sub channel on which the generation is announced
-- ARGV[4..] with a guard: field/value pairs the guard must hold (at least one pair)
-- Reply: {"ok", gen} when the table is now current (including the retry of a publication
--   whose reply was lost), {"conflict", current} when gen is not exactly current + 1,
--   {"guard", field} when the guard does not hold the value of that field. Nothing is
--   written unless the reply is "ok".
-- Invariant: generations grow by exactly one and never repeat; a generation is never
--   re-published with other content; a guarded publication happens only while the guard
--   (for migrate: the driver's fencing epoch in its journal record) holds, in the same step.

local table_key, guard_key = KEYS[1], KEYS[2]
if #KEYS == 1 and #ARGV ~= 3 then
  return redis.error_reply("ERR routing publish: want 3 arguments without a guard")
end
if #KEYS == 2 and (#ARGV < 5 or (#ARGV - 3) % 2 ~= 0) then
  return redis.error_reply("ERR routing publish: guard fields come in pairs")
end
if #KEYS < 1 or #KEYS > 2 then
  return redis.error_reply("ERR routing publish: want 1 or 2 keys")
end
if type(ARGV[1]) ~= "string" or not string.match(ARGV[1], "^%d+$") or tonumber(ARGV[1]) < 1 then
  return redis.error_reply("ERR routing publish: gen must be an integer >= 1")
end
if ARGV[2] == "" then return redis.error_reply("ERR routing publish: empty table") end
if ARGV[3] == "" then return redis.error_reply("ERR routing publish: empty channel") end
if #KEYS == 2 then
  for i = 4, #ARGV, 2 do
    if redis.call("HGET", guard_key, ARGV[i]) ~= ARGV[i + 1] then return {"guard", ARGV[i]} end
  end
end
local cur = redis.call("HMGET", table_key, "gen", "table")
local cgen = cur[1] or "0"
if cgen == ARGV[1] and cur[2] == ARGV[2] then
  return {"ok", cgen}
end
if tonumber(ARGV[1]) ~= tonumber(cgen) + 1 then
  return {"conflict", cgen}
end
redis.call("HSET", table_key, "gen", ARGV[1], "table", ARGV[2])
redis.call("PUBLISH", ARGV[3], ARGV[1])
return {"ok", ARGV[1]}
