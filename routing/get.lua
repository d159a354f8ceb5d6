-- get.lua: guarded read of one record of one placement unit.
--
-- Both keys carry the unit's hash tag, so they share one slot.
-- KEYS[1]  own  HASH ownership record: gen, state, "x:<tenant>"
-- KEYS[2]  rec  HASH record field -> encoded record
-- ARGV[1]  gen     route generation the caller routed with (integer >= 1)
-- ARGV[2]  tenant  tenant (non-empty)
-- ARGV[3]  field   record field (non-empty)
-- Reply:
--   {"stale", gen, state, moved}  this shard may not serve the read for that generation
--   {"ok"}                        no record
--   {"ok", record}                the encoded record (a tombstone included)
-- Invariant: a read is served only by the unit's open owner, never by a closed or
-- superseded copy that may already lag behind the new owner. Read-only.

local own_key, rec_key = KEYS[1], KEYS[2]
if #KEYS ~= 2 or #ARGV ~= 3 then
  return redis.error_reply("ERR routing get: want 2 keys and 3 arguments")
end
if type(ARGV[1]) ~= "string" or not string.match(ARGV[1], "^%d+$") or tonumber(ARGV[1]) < 1 then
  return redis.error_reply("ERR routing get: gen must be an integer >= 1")
end
if ARGV[2] == "" then return redis.error_reply("ERR routing get: empty tenant") end
if ARGV[3] == "" then return redis.error_reply("ERR routing get: empty field") end
local gen = tonumber(ARGV[1])
local own = redis.call("HMGET", own_key, "gen", "state")
local ogen, ostate = own[1] or "0", own[2] or ""
if ostate ~= "open" or tonumber(ogen) > gen then
  return {"stale", ogen, ostate, "0"}
end
if redis.call("HEXISTS", own_key, "x:" .. ARGV[2]) == 1 then
  return {"stale", ogen, ostate, "1"}
end
local rec = redis.call("HGET", rec_key, ARGV[3])
if rec then return {"ok", rec} end
return {"ok"}
