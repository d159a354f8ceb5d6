-- prepare.lua: make the target shard ready to import one unit for one migration, or wipe
-- what an import left there.
--
-- All keys carry the unit's hash tag "{<prefix>:<unit>}" (routing's layout), so they share
-- one slot on the target shard and the fence, the ownership check and the wipe are one
-- atomic step.
-- KEYS[1]  own   HASH   ownership record: gen, state, mig (the migration importing here), fence
--                       (the highest driver epoch that acted on the unit here), ready (the
--                       migration whose verified copy this is)
-- KEYS[2]  rec   HASH   records
-- KEYS[3]  ops   HASH   idempotency records
-- KEYS[4]  opx   ZSET   idempotency-record expiry
-- KEYS[5]  tomb  ZSET   tombstone expiry
-- KEYS[6]  log   STREAM change log
-- ARGV[1]  gen   import generation (integer >= 1)
-- ARGV[2]  mig   migration ID (non-empty)
-- ARGV[3]  mode  "prepare": claim the unit for import (record becomes importing@gen, mig set) and
--                           delete every data key, unless already claimed by this migration;
--                "reset":   delete every data key, only if claimed by this migration (a restart
--                           of the copy from a fresh snapshot);
--                "abandon": the migration was cancelled: state "cancelled", mig removed, data keys
--                           deleted, only if claimed by this migration (a claim of another
--                           migration holds nothing of this one: done);
--                "clear":   an operator clears the stuck claim of finished migration mig at gen:
--                           like "abandon", but refused unless the claim is there;
--                "floor":   raise the unit's version floor (routing's vfloor: the highest version
--                           of a tombstone purged) to ARGV[5], only if claimed by this migration;
--                "ready":   mark the import as complete and verified (own field "ready" = mig),
--                           only if claimed by this migration. A move opens only a marked
--                           target: a shard restored to a point before the mark (an older
--                           backup, which may lack copied records) is never opened.
-- ARGV[4]  epoch the caller's fencing epoch (integer >= 1)
-- ARGV[5]  floor with mode "floor": the source's version floor (integer >= 0)
-- Reply: {"ok", gen, state} when done (including a retry of a step already made);
--        {"refused", gen, state, mig} when the record is open, newer than gen, closed at or
--        after gen, or claimed by another migration: nothing written but the fence;
--        {"fenced", fence} when a driver with a newer epoch acted here: nothing written.
-- Invariant: an import never touches a unit that is open (owned) on this shard; data left
--   by an earlier era of this shard (a closed copy, a cancelled import) is deleted before
--   any imported record lands, so stale copies cannot be mistaken for data; a driver that
--   lost its migration (paused, zombie) changes nothing here once a newer one acted.

local own, rec, ops, opx, tomb, log = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
if type(ARGV[1]) ~= "string" or not string.match(ARGV[1], "^%d+$") or tonumber(ARGV[1]) < 1 then
  return redis.error_reply("ERR migrate prepare: gen must be an integer >= 1")
end
local gen, mig, mode, epoch = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
if mig == "" then return redis.error_reply("ERR migrate prepare: empty migration ID") end
if mode ~= "prepare" and mode ~= "reset" and mode ~= "abandon" and mode ~= "clear" and mode ~= "floor"
    and mode ~= "ready" then
  return redis.error_reply("ERR migrate prepare: bad mode")
end
if not string.match(epoch or "", "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate prepare: epoch must be an integer >= 1")
end
if mode == "floor" and not string.match(ARGV[5] or "", "^%d+$") then
  return redis.error_reply("ERR migrate prepare: floor must be an integer")
end

local o = redis.call("HMGET", own, "gen", "state", "mig", "fence")
local cgen, cstate, cmig = o[1] or "0", o[2] or "", o[3] or ""
if tonumber(o[4] or "0") > tonumber(epoch) then return {"fenced", o[4]} end
if tonumber(o[4] or "0") < tonumber(epoch) then redis.call("HSET", own, "fence", epoch) end
local ours = cstate == "importing" and tonumber(cgen) == gen and cmig == mig

local function wipe()
  redis.call("DEL", rec, ops, opx, tomb, log)
  redis.call("HDEL", own, "ready")
end

if mode == "prepare" then
  if ours then return {"ok", cgen, cstate} end
  if cstate == "open" or tonumber(cgen) > gen or (cstate == "importing" and cmig ~= mig)
      or (cstate == "closed" and tonumber(cgen) >= gen) then
    return {"refused", cgen, cstate, cmig}
  end
  redis.call("HSET", own, "gen", ARGV[1], "state", "importing", "mig", mig)
  wipe()
  return {"ok", ARGV[1], "importing"}
end

if mode == "floor" then
  if not ours then return {"refused", cgen, cstate, cmig} end
  local cur = tonumber(redis.call("HGET", own, "vfloor") or "0") or 0
  if tonumber(ARGV[5]) > cur then redis.call("HSET", own, "vfloor", ARGV[5]) end
  return {"ok", cgen, cstate}
end

if mode == "ready" then
  if not ours then return {"refused", cgen, cstate, cmig} end
  redis.call("HSET", own, "ready", mig)
  return {"ok", cgen, cstate}
end

if mode == "reset" then
  if not ours then return {"refused", cgen, cstate, cmig} end
  wipe()
  return {"ok", cgen, cstate}
end

-- abandon, clear
if ours then
  redis.call("HSET", own, "state", "cancelled")
  redis.call("HDEL", own, "mig")
  wipe()
  return {"ok", cgen, "cancelled"}
end
if mode == "clear" then return {"refused", cgen, cstate, cmig} end
-- Not (or no longer) claimed by this migration: a retry of an abandon already made, a
-- prepare that never happened, or another migration's claim (which wiped whatever this one
-- left). Nothing of this migration is left; the raised fence keeps its drivers out.
return {"ok", cgen, cstate}
