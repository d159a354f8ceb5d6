-- step.lua: compare-and-set of a migration's journal record: change its state and fields only
-- if its current state is one the caller expects.
--
-- KEYS: both carry the journal hash tag "{<prefix>:migrate}", so they share one slot.
--   1 journal  HASH   the migration's journal record
--   2 lock     STRING the unit's migration lock
-- ARGV:
--   1 expect   expected states, comma-separated (non-empty)
--   2 state    new state (non-empty)
--   3 release  "1": release the unit's lock if this migration holds it; "0": keep it
--   4 id       migration ID (the lock's value)
--   5..        field/value pairs to set with the state
-- Reply: {"ok", state, field1, value1, ...} when written, with the whole record as it now
--   is (saving the caller a read); {"changed", state} when the record's state is not
--   expected (nothing written; a retry of a step already made sees the new state here);
--   {"missing"} when there is no record.
-- Invariant: state changes follow the coordinator's state machine; two coordinators racing
--   on one migration cannot both take a transition out of the same state.

if ARGV[1] == "" or ARGV[2] == "" or ARGV[4] == "" then
  return redis.error_reply("ERR migrate step: empty expect, state or id")
end
if ARGV[3] ~= "0" and ARGV[3] ~= "1" then
  return redis.error_reply("ERR migrate step: release must be 0 or 1")
end
if (#ARGV - 4) % 2 ~= 0 then return redis.error_reply("ERR migrate step: fields come in pairs") end
local cur = redis.call("HGET", KEYS[1], "state")
if not cur then return {"missing"} end
local ok = false
for s in string.gmatch(ARGV[1], "[^,]+") do
  if s == cur then ok = true end
end
if not ok then return {"changed", cur} end
local args = {"state", ARGV[2]}
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
redis.call("HSET", KEYS[1], unpack(args))
if ARGV[3] == "1" and redis.call("GET", KEYS[2]) == ARGV[4] then
  redis.call("DEL", KEYS[2])
end
local out = {"ok", ARGV[2]}
for _, v in ipairs(redis.call("HGETALL", KEYS[1])) do out[#out + 1] = v end
return out
