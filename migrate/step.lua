-- step.lua: compare-and-set of a migration's journal record: change its state and fields only
-- if the caller still is the migration's driver (fencing epoch) and the current state is one
-- it expects.
--
-- Both keys carry the journal hash tag "{<prefix>:table}", so they share one slot.
-- KEYS[1]  journal  HASH   the migration's journal record
-- KEYS[2]  lock     STRING the unit's migration lock
-- KEYS[3..] STRING optional: further unit locks the migration holds (released with it)
-- ARGV[1]  expect   expected states, comma-separated (non-empty)
-- ARGV[2]  state    new state (non-empty)
-- ARGV[3]  release  "1": release the unit's locks this migration holds; "0": keep them
-- ARGV[4]  id       migration ID (the lock's value)
-- ARGV[5]  epoch    the driver's fencing epoch (integer >= 1), or "-" for a step that needs no
--                   driver (bookkeeping of a finished migration, cache mode)
-- ARGV[6]  lease    with an epoch: the driver's lease, ms (integer >= 1), renewed from the
--                   server's clock by every step
-- ARGV[7..] field/value pairs to set with the state
-- Reply: {"ok", state, field1, value1, ...} when written, with the whole record as it now
--   is (saving the caller a read); {"fenced", epoch} when another driver took the migration
--   over (its epoch is newer); {"changed", state} when the record's state is not expected
--   (nothing written; a retry of a step already made sees the new state here); {"missing"}
--   when there is no record.
-- Invariant: state changes follow the coordinator's state machine; only the migration's
--   current driver writes its record (the epoch is checked in the same step as the write),
--   and two drivers cannot both take a transition out of the same state.

local journal = KEYS[1]
if ARGV[1] == "" or ARGV[2] == "" or ARGV[4] == "" then
  return redis.error_reply("ERR migrate step: empty expect, state or id")
end
if ARGV[3] ~= "0" and ARGV[3] ~= "1" then
  return redis.error_reply("ERR migrate step: release must be 0 or 1")
end
local epoch = ARGV[5]
if epoch ~= "-" and not string.match(epoch or "", "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate step: epoch must be an integer >= 1 or -")
end
if epoch ~= "-" and not string.match(ARGV[6] or "", "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate step: lease must be an integer >= 1")
end
if (#ARGV - 6) % 2 ~= 0 then return redis.error_reply("ERR migrate step: fields come in pairs") end
local rec = redis.call("HMGET", journal, "state", "epoch")
local cur = rec[1]
if not cur then return {"missing"} end
if epoch ~= "-" and rec[2] ~= epoch then return {"fenced", rec[2] or "0"} end
local ok = false
for s in string.gmatch(ARGV[1], "[^,]+") do
  if s == cur then ok = true end
end
if not ok then return {"changed", cur} end
local args = {"state", ARGV[2]}
for i = 7, #ARGV do args[#args + 1] = ARGV[i] end
if epoch ~= "-" then
  local t = redis.call("TIME")
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local lease = now + tonumber(ARGV[6])
  if ARGV[3] == "1" then lease = 0 end
  args[#args + 1] = "lease"
  args[#args + 1] = string.format("%d", lease)
end
redis.call("HSET", journal, unpack(args))
if ARGV[3] == "1" then
  for i = 2, #KEYS do
    if redis.call("GET", KEYS[i]) == ARGV[4] then redis.call("DEL", KEYS[i]) end
  end
end
local out = {"ok", ARGV[2]}
for _, v in ipairs(redis.call("HGETALL", journal)) do out[#out + 1] = v end
return out
