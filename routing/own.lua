-- own.lua: compare-and-set of one unit's ownership record; returns the change log's last ID.
--
-- Both keys carry the unit's hash tag, so they share one slot with the unit's data.
-- KEYS[1]  own  HASH ownership record: gen, state, "x:<tenant>"
-- KEYS[2]  log  STREAM change log of the unit
-- ARGV[1]  fromgen    expected generation ("0" with fromstate "" = no record)
-- ARGV[2]  fromstate  expected state ("" = no record)
-- ARGV[3]  togen      new generation (integer >= fromgen)
-- ARGV[4]  tostate    new state (letters only, non-empty)
-- ARGV[5]  tenant     "" to change gen/state; otherwise the tenant whose moved-out mark to change
-- ARGV[6]  mark       with a tenant: "1" marks the tenant moved out, "0" clears the mark
-- ARGV[7]  fence      optional: "" (or absent) for none, else the caller's fencing epoch (integer
--                     >= 1); refused when the record's "fence" field is higher, and raised to it
--                     when lower (in the same step as the change)
-- ARGV[8]  ready      optional: "" (or absent) for none, else the value the record's "ready"
--                     field must hold for the change to be made (a migration's mark of its
--                     verified copy, set by migrate): a record without it is "unready"
-- Reply: {"ok"|"changed"|"fenced"|"unready", gen, state, lastid}: "ok" when the record now
--   equals the target (including a retry of a transition already made), "changed" when the
--   record was neither the expected one nor the target, "fenced" when a later epoch acted on
--   the record (for "fenced", gen is the record's fence), "unready" when the record is the
--   expected one but lacks the required "ready" value; nothing is written unless "ok". lastid is the
--   last change-log entry ID ("0-0" for none), final when the new state admits no writes: no
--   write can land between the transition and the reply.
-- Invariant: generations on a shard never go backwards; the record is only changed from the
--   state the caller observed; a fenced actor changes nothing once a later epoch has acted.

local own_key, log_key = KEYS[1], KEYS[2]
if #KEYS ~= 2 or #ARGV < 6 or #ARGV > 8 then
  return redis.error_reply("ERR routing own: want 2 keys and 6 to 8 arguments")
end
local function digits(s) return type(s) == "string" and string.match(s, "^%d+$") ~= nil end
if not digits(ARGV[1]) or not digits(ARGV[3]) then
  return redis.error_reply("ERR routing own: generations must be integers")
end
local fromgen, togen = tonumber(ARGV[1]), tonumber(ARGV[3])
local tostate, tenant, mark = ARGV[4], ARGV[5], ARGV[6]
if not string.match(tostate, "^%a+$") then
  return redis.error_reply("ERR routing own: tostate must be letters")
end
if togen < 1 or togen < fromgen then
  return redis.error_reply("ERR routing own: togen must be >= 1 and >= fromgen")
end
if tenant ~= "" and mark ~= "0" and mark ~= "1" then
  return redis.error_reply("ERR routing own: mark must be 0 or 1")
end
local fence = ARGV[7] or ""
local ready = ARGV[8] or ""
if fence ~= "" and (not digits(fence) or tonumber(fence) < 1) then
  return redis.error_reply("ERR routing own: fence must be an integer >= 1")
end

local function lastid()
  if redis.call("EXISTS", log_key) == 0 then return "0-0" end
  local info = redis.call("XINFO", "STREAM", log_key)
  for i = 1, #info, 2 do
    if info[i] == "last-generated-id" then return info[i + 1] end
  end
  return "0-0"
end

local own = redis.call("HMGET", own_key, "gen", "state", "fence")
local cgen, cstate = own[1] or "0", own[2] or ""
if fence ~= "" then
  if tonumber(own[3] or "0") > tonumber(fence) then
    return {"fenced", own[3], cstate, lastid()}
  end
  if tonumber(own[3] or "0") < tonumber(fence) then
    -- Raising the fence is not a change of the record; it is safe even when the CAS fails.
    redis.call("HSET", own_key, "fence", fence)
  end
end
local function marked()
  if tenant == "" then return true end
  return (redis.call("HEXISTS", own_key, "x:" .. tenant) == 1) == (mark == "1")
end
if tonumber(cgen) == togen and cstate == tostate and marked() then
  return {"ok", cgen, cstate, lastid()}
end
if tonumber(cgen) ~= fromgen or cstate ~= ARGV[2] then
  return {"changed", cgen, cstate, lastid()}
end
if ready ~= "" and redis.call("HGET", own_key, "ready") ~= ready then
  return {"unready", cgen, cstate, lastid()}
end
redis.call("HSET", own_key, "gen", ARGV[3], "state", tostate)
if tenant ~= "" then
  if mark == "1" then
    redis.call("HSET", own_key, "x:" .. tenant, ARGV[3])
  else
    redis.call("HDEL", own_key, "x:" .. tenant)
  end
end
return {"ok", ARGV[3], tostate, lastid()}
