-- acquire.lua: make the caller the driver of a migration: a new fencing epoch, durably in
-- the journal record, before the caller acts on anything.
--
-- All keys carry the journal hash tag "{<prefix>:table}", so they share one slot.
-- KEYS[1]  journal  HASH   the migration's journal record (fields epoch, holder, lease)
-- KEYS[2]  epochs   STRING the unit's epoch counter: every driver of every migration of the unit
--                          takes its epoch from it, so epochs of one unit never repeat
-- KEYS[3..] epochs  STRING optional: the epoch counters of further units the migration acts on
--                          (a split's sub-buckets); the new epoch is above every counter and
--                          all of them are raised to it, so the migrations of each of those
--                          units are fenced against this one and this one against theirs
-- ARGV[1]  holder   the caller's token (non-empty, random per drive)
-- ARGV[2]  lease    lease length, ms (integer >= 1), from the server's clock
-- ARGV[3]  force    "1": take over even from a live driver (Cancel); "0": only when the lease is
--                   free or expired
-- ARGV[4]  states   states in which the migration may be taken over, comma-separated (non-empty)
-- ARGV[5]  to       optional: the state the record moves to with the takeover ("" or absent:
--                   unchanged), e.g. Cancelling for a Cancel, so no other reader sees the new
--                   epoch without the new state
-- ARGV[6..] with `to`: field/value pairs set with it (only when the state changes)
-- Reply: {"ok", epoch} when the caller is the driver now (a retry with the same holder token,
--   after a lost reply, finds its own takeover and gets the same epoch, its lease renewed); {"held", holder, ms} when another
--   driver's lease runs for ms more (nothing written); {"state", state} when the migration
--   is in no state of ARGV[4] (nothing written); {"missing"} when there is no record.
-- Invariant: at most one driver's epoch is in the record; every shard script and journal
--   step of an older epoch is refused from the moment this returns "ok".

local journal, epochs = KEYS[1], KEYS[2]
local holder, force, states = ARGV[1], ARGV[3], ARGV[4]
if holder == nil or holder == "" then return redis.error_reply("ERR migrate acquire: empty holder") end
if not string.match(ARGV[2] or "", "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate acquire: lease must be an integer >= 1")
end
if force ~= "0" and force ~= "1" then return redis.error_reply("ERR migrate acquire: force must be 0 or 1") end
if states == nil or states == "" then return redis.error_reply("ERR migrate acquire: empty states") end
local to = ARGV[5] or ""
if #ARGV > 5 and (to == "" or (#ARGV - 5) % 2 ~= 0) then
  return redis.error_reply("ERR migrate acquire: fields need a state and come in pairs")
end
local rec = redis.call("HMGET", journal, "state", "holder", "lease", "epoch")
if not rec[1] then return {"missing"} end
local ok = false
for s in string.gmatch(states, "[^,]+") do
  if s == rec[1] then ok = true end
end
if not ok then return {"state", rec[1]} end
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if rec[2] == holder and rec[4] then
  -- This takeover already happened (its reply was lost): the holder is still the caller,
  -- so no other driver took over since; the same epoch, the lease renewed.
  redis.call("HSET", journal, "lease", string.format("%d", now + tonumber(ARGV[2])))
  return {"ok", rec[4]}
end
local until_ = tonumber(rec[3] or "0") or 0
if force == "0" and rec[2] and rec[2] ~= holder and until_ > now then
  return {"held", rec[2], string.format("%d", until_ - now)}
end
local epoch = redis.call("INCR", epochs)
if #KEYS > 2 then
  for i = 3, #KEYS do
    local e = tonumber(redis.call("GET", KEYS[i]) or "0") or 0
    if e >= epoch then epoch = e + 1 end
  end
  for i = 2, #KEYS do redis.call("SET", KEYS[i], epoch) end
end
redis.call("HSET", journal, "epoch", epoch, "holder", holder,
  "lease", string.format("%d", now + tonumber(ARGV[2])))
if to ~= "" and to ~= rec[1] then
  local args = {"state", to}
  for i = 6, #ARGV do args[#args + 1] = ARGV[i] end
  redis.call("HSET", journal, unpack(args))
end
return {"ok", tostring(epoch)}
