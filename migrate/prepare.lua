-- prepare.lua: make the target shard ready to import one unit for one migration, or wipe
-- what an import left there.
--
-- KEYS: all carry the unit's hash tag "{<prefix>:<unit>}" (routing's layout), so they share
-- one slot on the target shard and the ownership check and the wipe are one atomic step.
--   1 own   HASH   ownership record: gen, state, mig (the migration importing here)
--   2 rec   HASH   records
--   3 ops   HASH   idempotency records
--   4 opx   ZSET   idempotency-record expiry
--   5 tomb  ZSET   tombstone expiry
--   6 log   STREAM change log
-- ARGV:
--   1 gen   import generation (integer >= 1)
--   2 mig   migration ID (non-empty)
--   3 mode  "prepare": claim the unit for import (record becomes importing@gen, mig set) and
--                      delete every data key, unless already claimed by this migration;
--           "reset":   delete every data key, only if claimed by this migration (a restart
--                      of the copy from a fresh snapshot);
--           "abandon": the migration was cancelled: state "cancelled", mig removed, data keys
--                      deleted, only if claimed by this migration;
--           "floor":   raise the unit's version floor (routing's vfloor: the highest version
--                      of a tombstone purged) to ARGV[4], only if claimed by this migration.
--   4 floor  with mode "floor": the source's version floor (integer >= 0)
-- Reply: {"ok", gen, state} when done (including a retry of a step already made);
--        {"refused", gen, state, mig} when the record is open, newer than gen, or claimed by
--        another migration: nothing written.
-- Invariant: an import never touches a unit that is open (owned) on this shard, and data
--   left by an earlier era of this shard (a closed copy, a cancelled import) is deleted
--   before any imported record lands, so stale copies cannot be mistaken for data.

if type(ARGV[1]) ~= "string" or not string.match(ARGV[1], "^%d+$") or tonumber(ARGV[1]) < 1 then
  return redis.error_reply("ERR migrate prepare: gen must be an integer >= 1")
end
local gen, mig, mode = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if mig == "" then return redis.error_reply("ERR migrate prepare: empty migration ID") end
if mode ~= "prepare" and mode ~= "reset" and mode ~= "abandon" and mode ~= "floor" then
  return redis.error_reply("ERR migrate prepare: bad mode")
end
if mode == "floor" and not string.match(ARGV[4] or "", "^%d+$") then
  return redis.error_reply("ERR migrate prepare: floor must be an integer")
end

local own = redis.call("HMGET", KEYS[1], "gen", "state", "mig")
local cgen, cstate, cmig = own[1] or "0", own[2] or "", own[3] or ""
local ours = cstate == "importing" and tonumber(cgen) == gen and cmig == mig

local function wipe()
  redis.call("DEL", KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
end

if mode == "prepare" then
  if ours then return {"ok", cgen, cstate} end
  if cstate == "open" or tonumber(cgen) > gen or (cstate == "importing" and cmig ~= mig) then
    return {"refused", cgen, cstate, cmig}
  end
  redis.call("HSET", KEYS[1], "gen", ARGV[1], "state", "importing", "mig", mig)
  wipe()
  return {"ok", ARGV[1], "importing"}
end

if mode == "floor" then
  if not ours then return {"refused", cgen, cstate, cmig} end
  local cur = tonumber(redis.call("HGET", KEYS[1], "vfloor") or "0") or 0
  if tonumber(ARGV[4]) > cur then redis.call("HSET", KEYS[1], "vfloor", ARGV[4]) end
  return {"ok", cgen, cstate}
end

if mode == "reset" then
  if not ours then return {"refused", cgen, cstate, cmig} end
  wipe()
  return {"ok", cgen, cstate}
end

-- abandon
if ours then
  redis.call("HSET", KEYS[1], "state", "cancelled")
  redis.call("HDEL", KEYS[1], "mig")
  wipe()
  return {"ok", cgen, "cancelled"}
end
if cstate == "importing" and cmig ~= mig then return {"refused", cgen, cstate, cmig} end
-- Not (or no longer) claimed by this migration: a retry of an abandon already made, or a
-- prepare that never happened. Nothing of this migration is left.
return {"ok", cgen, cstate}
