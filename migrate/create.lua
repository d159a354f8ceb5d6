-- create.lua: create a migration's journal record and take the unit's migration lock.
--
-- All keys carry the journal hash tag "{<prefix>:migrate}", so they share one slot in the
-- control Redis and the lock and the record are created in one atomic step.
-- KEYS[1]  journal  HASH  the migration's journal record
-- KEYS[2]  lock     STRING the unit's lock: ID of the migration that holds it
-- KEYS[3]  index    ZSET  every migration ID, scored by creation time (unix ms)
-- KEYS[4..] STRING optional: further unit locks the migration takes with the first (a
--                  fold-back's bucket), all or none
-- ARGV[1]  id       migration ID (non-empty)
-- ARGV[2]  created  creation time, unix ms (integer)
-- ARGV[3..] field/value pairs of the new record (must include "state")
-- Reply: {"ok"} when created (or a retry of this creation: the record exists with the same
--   unit lock); {"busy", otherid} when another migration holds the unit; {"exists"} when the
--   ID is taken by a different record. Nothing is written unless the reply is "ok".
-- Invariant: at most one unfinished migration per unit; a record is never overwritten.

local id = ARGV[1]
if id == "" then return redis.error_reply("ERR migrate create: empty id") end
if not string.match(ARGV[2] or "", "^%d+$") then
  return redis.error_reply("ERR migrate create: created must be an integer")
end
if #ARGV < 4 or (#ARGV - 2) % 2 ~= 0 then
  return redis.error_reply("ERR migrate create: fields come in pairs")
end
local holder = redis.call("GET", KEYS[2])
if redis.call("EXISTS", KEYS[1]) == 1 then
  if holder == id then return {"ok"} end
  return {"exists"}
end
if holder and holder ~= id then return {"busy", holder} end
for i = 4, #KEYS do
  local h = redis.call("GET", KEYS[i])
  if h and h ~= id then return {"busy", h} end
end
local args = {}
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
redis.call("HSET", KEYS[1], unpack(args))
redis.call("SET", KEYS[2], id)
for i = 4, #KEYS do redis.call("SET", KEYS[i], id) end
redis.call("ZADD", KEYS[3], ARGV[2], id)
return {"ok"}
