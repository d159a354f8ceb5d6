-- apply.lua: apply a batch of copied records and idempotency records to the unit being
-- imported on the target shard, order-insensitively.
--
-- All keys carry the unit's hash tag (routing's layout), so they share one slot on the
-- target shard; the ownership check and every change of the batch are one atomic step.
-- KEYS[1]  own   HASH   ownership record (must be importing at ARGV[1] for migration ARGV[2]; its
--                       fence must not be newer than ARGV[4])
-- KEYS[2]  rec   HASH   records: field -> "<version>:l:<value>" | "<version>:t:"
-- KEYS[3]  ops   HASH   idempotency records: op ID -> "<fingerprint>:<outcome>:<version>[:<field>]"
-- KEYS[4]  opx   ZSET   op ID scored by expiry (unix ms)
-- KEYS[5]  tomb  ZSET   tombstone field scored by expiry (unix ms)
-- ARGV[1]  gen   import generation (integer >= 1)
-- ARGV[2]  mig   migration ID (non-empty)
-- ARGV[3]  now   current time, unix ms (integer)
-- ARGV[4]  epoch the driver's fencing epoch (integer >= 1)
-- ARGV[5..] items, four arguments each: kind ("r" record | "o" op record), field or op ID
--           (non-empty), encoded value (non-empty), expiry unix ms (integer; for a record,
--           the tombstone's expiry, ignored for a live record)
-- Reply:
--   {"ok", written, skipped}               every item applied or found older/equal
--   {"conflict", kind, field, stored, incoming}  an equal version with other content, or an
--                                          op ID recorded with another result: nothing written
--   {"stale", gen, state, mig}             the unit is not importing for this migration here
--   {"fenced", fence}                      a driver with a newer epoch acted here: nothing written
-- Invariant: a stored record is only ever replaced by a strictly newer version; tombstones
--   are kept (a late copy of an older version cannot resurrect a key); an op record, once
--   stored, never changes; the whole batch is checked before the first write; a driver that
--   lost its migration writes nothing once a newer one acted here.

local function int(s)
  if type(s) ~= "string" or not string.match(s, "^%d+$") then return nil end
  return tonumber(s)
end
local gen, now = int(ARGV[1]), int(ARGV[3])
if not gen or gen < 1 then return redis.error_reply("ERR migrate apply: gen must be an integer >= 1") end
if not now then return redis.error_reply("ERR migrate apply: now must be an integer") end
local mig = ARGV[2]
if mig == "" then return redis.error_reply("ERR migrate apply: empty migration ID") end
local epoch = ARGV[4]
if not string.match(epoch or "", "^[1-9]%d*$") then
  return redis.error_reply("ERR migrate apply: epoch must be an integer >= 1")
end
if (#ARGV - 4) % 4 ~= 0 then return redis.error_reply("ERR migrate apply: items come in fours") end

local own = redis.call("HMGET", KEYS[1], "gen", "state", "mig", "fence")
if tonumber(own[4] or "0") > tonumber(epoch) then return {"fenced", own[4]} end
if own[2] ~= "importing" or tonumber(own[1] or "0") ~= gen or own[3] ~= mig then
  return {"stale", own[1] or "0", own[2] or "", own[3] or ""}
end

-- Pass 1: validate everything and find conflicts; no writes.
local plan = {}
for i = 5, #ARGV, 4 do
  local kind, field, val, exp = ARGV[i], ARGV[i + 1], ARGV[i + 2], int(ARGV[i + 3])
  if field == "" or val == "" or not exp then
    return redis.error_reply("ERR migrate apply: bad item at " .. i)
  end
  if kind == "r" then
    local iv, flag = string.match(val, "^(%d+):(%a):")
    if not iv or (flag ~= "l" and flag ~= "t") then
      return redis.error_reply("ERR migrate apply: malformed record at " .. i)
    end
    local cur = redis.call("HGET", KEYS[2], field)
    local write = true
    if cur then
      local cv = tonumber(string.match(cur, "^(%d+):") or "0")
      if tonumber(iv) < cv then
        write = false
      elseif tonumber(iv) == cv then
        if cur ~= val then return {"conflict", "r", field, cur, val} end
        write = false
      end
    end
    plan[#plan + 1] = {write, "r", field, val, exp, flag == "t"}
  elseif kind == "o" then
    if not (string.match(val, "^[^:]+:%a+:%d+$") or string.match(val, "^[^:]+:%a+:%d+:")) then
      return redis.error_reply("ERR migrate apply: malformed op record at " .. i)
    end
    local cur = redis.call("HGET", KEYS[3], field)
    if cur and cur ~= val then return {"conflict", "o", field, cur, val} end
    plan[#plan + 1] = {cur == false and exp > now, "o", field, val, exp}
  else
    return redis.error_reply("ERR migrate apply: bad kind at " .. i)
  end
end

-- Pass 2: write.
if tonumber(own[4] or "0") < tonumber(epoch) then redis.call("HSET", KEYS[1], "fence", epoch) end
local written, skipped = 0, 0
for _, p in ipairs(plan) do
  if not p[1] then
    skipped = skipped + 1
  elseif p[2] == "r" then
    redis.call("HSET", KEYS[2], p[3], p[4])
    if p[6] then
      redis.call("ZADD", KEYS[5], string.format("%d", p[5]), p[3])
    else
      redis.call("ZREM", KEYS[5], p[3])
    end
    written = written + 1
  else
    redis.call("HSET", KEYS[3], p[3], p[4])
    redis.call("ZADD", KEYS[4], string.format("%d", p[5]), p[3])
    written = written + 1
  end
end
return {"ok", tostring(written), tostring(skipped)}
