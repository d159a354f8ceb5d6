-- renew.lua: extend a driver's lease on its migration, if it still is the driver.
--
-- KEYS[1]  journal  HASH the migration's journal record (one key, one slot)
-- ARGV[1]  epoch    the driver's fencing epoch (integer >= 1)
-- ARGV[2]  lease    lease length, ms (integer >= 0), from the server's clock; 0 releases the
--                   lease (a driver that stops on its own lets the next one take over at once)
-- Reply: {"ok"} when renewed (or released); {"fenced", epoch} when another driver holds the migration (or
--   the record is gone, epoch "0"): nothing written.
-- Invariant: a driver that lost the migration never extends the lease of the one that took it.

local journal = KEYS[1]
if not string.match(ARGV[1] or "", "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate renew: epoch must be an integer >= 1")
end
if not string.match(ARGV[2] or "", "^%d+$") then
  return redis.error_reply("ERR migrate renew: lease must be an integer >= 0")
end
local rec = redis.call("HMGET", journal, "epoch", "state")
if rec[1] ~= ARGV[1] then return {"fenced", rec[1] or "0"} end
if rec[2] == "OwnedB" or rec[2] == "Cancelled" or rec[2] == "Aborted" then return {"ok"} end
if ARGV[2] == "0" then
  redis.call("HSET", journal, "lease", "0")
  return {"ok"}
end
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("HSET", journal, "lease", string.format("%d", now + tonumber(ARGV[2])))
return {"ok"}
