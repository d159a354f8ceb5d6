-- fold.lua: the target side of a fold-back: one overridden tenant's records return from its
-- override unit on another shard into its shared hash bucket on this shard. The bucket
-- stays open for its other tenants throughout; the tenant stays marked as moved out of it
-- (routing refuses its routed reads and writes here) until the fold-back opens it.
--
-- All keys carry the bucket's hash tag (routing's layout), so they share one slot on the
-- target shard; the fence, the ownership check and the change are one atomic step.
-- KEYS[1]  own   HASH   the bucket's ownership record: gen, state, x:<tenant> (routing's moved-out
--                       mark), xm:<tenant> (the migration that set or took over the mark), xf:<tenant>
--                       (the highest driver epoch of a migration of that tenant that acted here),
--                       xr:<tenant> (the fold-back whose copy of the tenant here is complete and
--                       verified), vfloor (routing's version floor)
-- KEYS[2]  rec   HASH   records
-- KEYS[3]  ops   HASH   idempotency records
-- KEYS[4]  opx   ZSET   idempotency-record expiry
-- KEYS[5]  tomb  ZSET   tombstone expiry
-- ARGV[1]  mode    "claim": mark the tenant as moved out of the bucket for fold-back ARGV[3] (set
--                           the mark if missing, take it over if another migration set it), if
--                           the bucket is open at ARGV[5];
--                  "wipe":  delete the tenant's records, tombstones and idempotency records named
--                           in ARGV[7..] (what an earlier era left, or this fold-back's copy when
--                           it is cancelled), only while this fold-back holds the mark; with no
--                           items it only raises the fence (a cancel's first step);
--                  "apply": write the items in ARGV[7..] (four arguments each, as apply.lua),
--                           order-insensitively, only while this fold-back holds the mark; every
--                           record must be the tenant's;
--                  "floor": raise the bucket's version floor to ARGV[6], only while this
--                           fold-back holds the mark;
--                  "ready": note that this fold-back's copy of the tenant here is complete and
--                           verified (xr:<tenant>), only while this fold-back holds the mark; a
--                           claim taken over and every wipe remove the note;
--                  "open":  the flip: remove the tenant's mark, only if this fold-back holds it
--                           and its ready note (done already when the tenant is not marked; a
--                           bucket restored to a point before the note, whose copy may lack
--                           records, is "unready")
-- ARGV[2]  tenant  the tenant (non-empty)
-- ARGV[3]  mig     fold-back (migration) ID (non-empty)
-- ARGV[4]  epoch   the driver's fencing epoch (integer >= 1)
-- ARGV[5]  gen     the bucket's generation, open throughout the fold-back (integer >= 1)
-- ARGV[6]  arg     "apply": current time, unix ms; "floor": the floor (integer >= 0); else "-"
-- ARGV[7..] "wipe": pairs kind ("r" record field | "o" op ID), name; "apply": fours kind,
--           field or op ID, encoded value, expiry unix ms (as apply.lua)
-- Reply: {"ok", n} when done (n: items written by apply, deleted by wipe, "0" otherwise; a
--   retry of a step already made included; "-1" from wipe when the mark is not this
--   fold-back's: nothing deleted); {"unready", gen, state, mig} from open when this fold-back
--   holds the mark without its ready note, or no mark and no note are there (nothing written
--   but the fence); {"conflict", kind, field, stored, incoming} from apply
--   (as apply.lua: nothing written); {"foreign", field} from apply when a record is not the
--   tenant's (nothing written); {"changed", gen, state, mig} when the bucket is not open at
--   gen, or (apply, floor, open) the mark is not this fold-back's: nothing written but the
--   fence; {"fenced", fence} when a newer driver acted here: nothing written.
-- Invariant: only the tenant's own items and marks are touched; the bucket's record, its
--   other tenants and their marks never change; the tenant's items are written only while
--   the tenant is marked (no routed call can reach them); a stored record is only replaced
--   by a strictly newer version and an op record never changes; a driver that lost its
--   fold-back changes nothing here once a newer one acted.

local own, rec, ops, opx, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if #KEYS ~= 5 or #ARGV < 6 then
  return redis.error_reply("ERR migrate fold: want 5 keys and at least 6 arguments")
end
local mode, tenant, mig, epoch, gen, arg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if mode ~= "claim" and mode ~= "wipe" and mode ~= "apply" and mode ~= "floor" and mode ~= "ready" and mode ~= "open" then
  return redis.error_reply("ERR migrate fold: bad mode")
end
if tenant == "" then return redis.error_reply("ERR migrate fold: empty tenant") end
if mig == "" then return redis.error_reply("ERR migrate fold: empty migration ID") end
if not string.match(epoch, "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate fold: epoch must be an integer >= 1")
end
if not string.match(gen, "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate fold: gen must be an integer >= 1")
end
if (mode == "apply" or mode == "floor") and not string.match(arg, "^%d+$") then
  return redis.error_reply("ERR migrate fold: " .. mode .. " needs an integer argument")
end
local width = 0
if mode == "wipe" then width = 2 elseif mode == "apply" then width = 4 end
if width == 0 and #ARGV ~= 6 then
  return redis.error_reply("ERR migrate fold: only wipe and apply take items")
end
if width > 0 and (#ARGV - 6) % width ~= 0 then
  return redis.error_reply("ERR migrate fold: items come in " .. width .. "s")
end

-- The tenant's record-field prefix, as routing's RecordField writes it.
local prefix = string.format("%d", #tenant) .. ":" .. tenant
local function mine(field) return string.sub(field, 1, #prefix) == prefix end
-- The record field an op record names ("" for one written before op records named it).
local function opfield(v) return string.match(v, "^[^:]*:[^:]*:[^:]*:(.*)$") or "" end

-- Pass 1 of apply: validate every item before anything is written.
local plan = {}
for i = 7, (width > 0 and #ARGV or 0), math.max(width, 1) do
  local kind, name = ARGV[i], ARGV[i + 1]
  if (kind ~= "r" and kind ~= "o") or name == "" then
    return redis.error_reply("ERR migrate fold: bad item at " .. i)
  end
  if mode == "apply" then
    local val, exp = ARGV[i + 2], ARGV[i + 3]
    if val == "" or not string.match(exp, "^%d+$") then
      return redis.error_reply("ERR migrate fold: bad item at " .. i)
    end
    if kind == "r" then
      local iv, flag = string.match(val, "^(%d+):(%a):")
      if not iv or (flag ~= "l" and flag ~= "t") then
        return redis.error_reply("ERR migrate fold: malformed record at " .. i)
      end
    elseif not (string.match(val, "^[^:]+:%a+:%d+$") or string.match(val, "^[^:]+:%a+:%d+:")) then
      return redis.error_reply("ERR migrate fold: malformed op record at " .. i)
    end
  end
end

local o = redis.call("HMGET", own, "gen", "state", "x:" .. tenant, "xm:" .. tenant, "xf:" .. tenant, "xr:" .. tenant)
local cgen, cstate, mark, who = o[1] or "0", o[2] or "", o[3], o[4] or ""
if tonumber(o[5] or "0") > tonumber(epoch) then return {"fenced", o[5]} end
if tonumber(o[5] or "0") < tonumber(epoch) then redis.call("HSET", own, "xf:" .. tenant, epoch) end
if cstate ~= "open" or cgen ~= gen then return {"changed", cgen, cstate, who} end
local ours = mark ~= false and who == mig

local ready = o[6] == mig

if mode == "claim" then
  if not ours then
    redis.call("HSET", own, "x:" .. tenant, mark or gen, "xm:" .. tenant, mig)
    redis.call("HDEL", own, "xr:" .. tenant)
  end
  return {"ok", "0"}
end

if mode == "open" then
  if ours and ready then
    -- The note stays, so that a retry of this open (a lost reply) finds it done.
    redis.call("HDEL", own, "x:" .. tenant, "xm:" .. tenant)
  elseif ours then
    return {"unready", cgen, cstate, who}
  elseif mark then
    return {"changed", cgen, cstate, who}
  elseif not ready then
    -- Neither the mark nor this fold-back's note: not opened by this fold-back (a bucket
    -- restored to a point before its claim).
    return {"unready", cgen, cstate, who}
  end
  return {"ok", "0"}
end

if mode == "wipe" then
  if not ours then return {"ok", "-1"} end
  redis.call("HDEL", own, "xr:" .. tenant)
  local n = 0
  for i = 7, #ARGV, 2 do
    local name = ARGV[i + 1]
    if ARGV[i] == "r" then
      if mine(name) then
        n = n + redis.call("HDEL", rec, name)
        redis.call("ZREM", tomb, name)
      end
    else
      local v = redis.call("HGET", ops, name)
      if v and mine(opfield(v)) then
        n = n + redis.call("HDEL", ops, name)
        redis.call("ZREM", opx, name)
      end
    end
  end
  return {"ok", string.format("%d", n)}
end

if not ours then return {"changed", cgen, cstate, who} end

if mode == "floor" then
  local cur = tonumber(redis.call("HGET", own, "vfloor") or "0") or 0
  if tonumber(arg) > cur then redis.call("HSET", own, "vfloor", arg) end
  return {"ok", "0"}
end

if mode == "ready" then
  redis.call("HSET", own, "xr:" .. tenant, mig)
  return {"ok", "0"}
end

-- apply: find conflicts and foreign records, then write.
local now = tonumber(arg)
for i = 7, #ARGV, 4 do
  local kind, field, val, exp = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  if kind == "r" then
    if not mine(field) then return {"foreign", field} end
    local cur = redis.call("HGET", rec, field)
    local write = true
    if cur then
      local cv = tonumber(string.match(cur, "^(%d+):") or "0")
      local iv = tonumber(string.match(val, "^(%d+):"))
      if iv < cv then
        write = false
      elseif iv == cv then
        if cur ~= val then return {"conflict", "r", field, cur, val} end
        write = false
      end
    end
    plan[#plan + 1] = {write, "r", field, val, exp, string.match(val, "^%d+:t:") ~= nil}
  else
    local f = opfield(val)
    if f ~= "" and not mine(f) then return {"foreign", f} end
    local cur = redis.call("HGET", ops, field)
    if cur and cur ~= val then return {"conflict", "o", field, cur, val} end
    plan[#plan + 1] = {cur == false and exp > now, "o", field, val, exp}
  end
end
local written = 0
for _, p in ipairs(plan) do
  if p[1] then
    if p[2] == "r" then
      redis.call("HSET", rec, p[3], p[4])
      if p[6] then
        redis.call("ZADD", tomb, string.format("%d", p[5]), p[3])
      else
        redis.call("ZREM", tomb, p[3])
      end
    else
      redis.call("HSET", ops, p[3], p[4])
      redis.call("ZADD", opx, string.format("%d", p[5]), p[3])
    end
    written = written + 1
  end
end
return {"ok", string.format("%d", written)}
