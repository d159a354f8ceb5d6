-- cleanup.lua: delete the source shard's copy of a unit after a finished migration's grace
-- period.
--
-- All keys carry the unit's hash tag (routing's layout), so they share one slot on the
-- source shard; the ownership check and the deletion are one atomic step.
-- KEYS[1]  own   HASH   ownership record
-- KEYS[2]  rec   HASH   records
-- KEYS[3]  ops   HASH   idempotency records
-- KEYS[4]  opx   ZSET   idempotency-record expiry
-- KEYS[5]  tomb  ZSET   tombstone expiry
-- KEYS[6]  log   STREAM change log
-- ARGV[1]  gen   the generation at which the migration closed the unit here (integer >= 1)
-- ARGV[2]  epoch the cleaning caller's fencing epoch, from the unit's epoch counter (integer >= 1)
-- Reply: {"ok", "1"} when the copy was deleted (or was already gone), {"ok", "0"} when the
--   record is no longer the closed record the migration left (the unit was owned or
--   imported here again since): nothing deleted; {"fenced", fence} when a caller with a
--   newer epoch acted on the unit here (a driver, a later cleanup): nothing written.
-- Invariant: data is only deleted under an ownership record that refuses every write and
--   read: never under an open or importing unit, and never by a caller whose epoch is
--   older than one that acted here since. The ownership record itself is kept (its fence
--   rises to the epoch).

if type(ARGV[1]) ~= "string" or not string.match(ARGV[1], "^%d+$") or tonumber(ARGV[1]) < 1 then
  return redis.error_reply("ERR migrate cleanup: gen must be an integer >= 1")
end
if type(ARGV[2]) ~= "string" or not string.match(ARGV[2], "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate cleanup: epoch must be an integer >= 1")
end
local own = redis.call("HMGET", KEYS[1], "gen", "state", "fence")
if tonumber(own[3] or "0") > tonumber(ARGV[2]) then return {"fenced", own[3]} end
if own[2] ~= "closed" or tonumber(own[1] or "0") ~= tonumber(ARGV[1]) then
  return {"ok", "0"}
end
if tonumber(own[3] or "0") < tonumber(ARGV[2]) then redis.call("HSET", KEYS[1], "fence", ARGV[2]) end
redis.call("DEL", KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return {"ok", "1"}
