-- carve.lua: close, reopen or purge one tenant inside its shared hash bucket on the source
-- shard of a carve-out (the tenant's records leave the bucket for an override unit of the
-- tenant on another shard). The bucket itself stays open for its other tenants throughout.
--
-- All keys carry the bucket's hash tag (routing's layout), so they share one slot on the
-- source shard; the fence, the ownership check and the change are one atomic step.
-- KEYS[1]  own   HASH   the bucket's ownership record: gen, state, x:<tenant> (routing's moved-out
--                       mark), xm:<tenant> (the carve-out that set it), xf:<tenant> (the highest
--                       driver epoch of a carve-out of that tenant that acted here)
-- KEYS[2]  log   STREAM the bucket's change log
-- KEYS[3]  rec   HASH   records
-- KEYS[4]  ops   HASH   idempotency records
-- KEYS[5]  opx   ZSET   idempotency-record expiry
-- KEYS[6]  tomb  ZSET   tombstone expiry
-- ARGV[1]  mode    "close":  mark the tenant as moved out of the bucket (routing then refuses its
--                            reads and writes here with a stale route) for carve-out ARGV[3], if
--                            the bucket is open at ARGV[5] and the tenant unmarked;
--                  "reopen": clear the mark, only if carve-out ARGV[3] set it (an abort or cancel
--                            before the flip);
--                  "purge":  delete the tenant's records, tombstones and idempotency records
--                            named in ARGV[7..], only while carve-out ARGV[3]'s mark is set (the
--                            cleanup of the closed copy after the flip)
-- ARGV[2]  tenant  the tenant (non-empty)
-- ARGV[3]  mig     carve-out (migration) ID (non-empty)
-- ARGV[4]  epoch   the driver's fencing epoch (integer >= 1; "0" for purge, which has no driver)
-- ARGV[5]  gen     the bucket's generation the carve-out started from (integer >= 1)
-- ARGV[6]  markgen the generation stored in the mark (integer >= 1)
-- ARGV[7..] purge only: pairs kind ("r" record field | "o" op ID), name
-- Reply: {"ok", lastid} when done (a retry of a close or reopen already made included;
--   lastid is the bucket's last change-log ID: with the mark set, every write of the tenant
--   is at or before it and none can follow); {"ok", n} for purge (items deleted, "-1" when
--   the mark is not this carve-out's: nothing deleted); {"changed", gen, state, mig} when
--   the bucket is not open at gen or the tenant is marked by someone else: nothing written
--   but the fence; {"fenced", fence} when a newer driver acted here: nothing written.
-- Invariant: only the tenant's own items are touched; the bucket's record, its other
--   tenants and its other marks are never changed; a driver that lost its carve-out changes
--   nothing here once a newer one acted; a purge never deletes data the bucket may serve.

local own, log, rec, ops, opx, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
if #KEYS ~= 6 or #ARGV < 6 then
  return redis.error_reply("ERR migrate carve: want 6 keys and at least 6 arguments")
end
local mode, tenant, mig, epoch = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if mode ~= "close" and mode ~= "reopen" and mode ~= "purge" then
  return redis.error_reply("ERR migrate carve: bad mode")
end
if tenant == "" then return redis.error_reply("ERR migrate carve: empty tenant") end
if mig == "" then return redis.error_reply("ERR migrate carve: empty migration ID") end
if not string.match(epoch, "^%d+$") or (mode ~= "purge" and tonumber(epoch) < 1) then
  return redis.error_reply("ERR migrate carve: epoch must be an integer >= 1")
end
if not string.match(ARGV[5], "^[1-9]%d*$") or not string.match(ARGV[6], "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate carve: generations must be integers >= 1")
end
if mode ~= "purge" and #ARGV ~= 6 then
  return redis.error_reply("ERR migrate carve: only purge takes items")
end
if (#ARGV - 6) % 2 ~= 0 then return redis.error_reply("ERR migrate carve: items come in pairs") end
for i = 7, #ARGV, 2 do
  if (ARGV[i] ~= "r" and ARGV[i] ~= "o") or ARGV[i + 1] == "" then
    return redis.error_reply("ERR migrate carve: bad item at " .. i)
  end
end

local function lastid()
  if redis.call("EXISTS", log) == 0 then return "0-0" end
  local info = redis.call("XINFO", "STREAM", log)
  for i = 1, #info, 2 do
    if info[i] == "last-generated-id" then return info[i + 1] end
  end
  return "0-0"
end

local o = redis.call("HMGET", own, "gen", "state", "x:" .. tenant, "xm:" .. tenant, "xf:" .. tenant)
local cgen, cstate, mark, who = o[1] or "0", o[2] or "", o[3], o[4] or ""
local ours = mark ~= false and who == mig

if mode == "purge" then
  if not ours then return {"ok", "-1"} end
  -- The tenant's record-field prefix, as routing's RecordField writes it.
  local prefix = string.format("%d", #tenant) .. ":" .. tenant
  local n = 0
  for i = 7, #ARGV, 2 do
    local name = ARGV[i + 1]
    if ARGV[i] == "r" then
      if string.sub(name, 1, #prefix) == prefix then
        n = n + redis.call("HDEL", rec, name)
        redis.call("ZREM", tomb, name)
      end
    else
      local v = redis.call("HGET", ops, name)
      local f = v and string.match(v, "^[^:]*:[^:]*:[^:]*:(.*)$")
      if f and string.sub(f, 1, #prefix) == prefix then
        n = n + redis.call("HDEL", ops, name)
        redis.call("ZREM", opx, name)
      end
    end
  end
  return {"ok", string.format("%d", n)}
end

if tonumber(o[5] or "0") > tonumber(epoch) then return {"fenced", o[5]} end
if tonumber(o[5] or "0") < tonumber(epoch) then redis.call("HSET", own, "xf:" .. tenant, epoch) end

if mode == "reopen" then
  if ours then redis.call("HDEL", own, "x:" .. tenant, "xm:" .. tenant) end
  return {"ok", lastid()}
end

-- close
if ours then return {"ok", lastid()} end
if mark or cstate ~= "open" or cgen ~= ARGV[5] then
  return {"changed", cgen, cstate, who}
end
redis.call("HSET", own, "x:" .. tenant, ARGV[6], "xm:" .. tenant, mig)
return {"ok", lastid()}
