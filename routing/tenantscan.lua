-- tenantscan.lua: look through one page of a bucket's records or idempotency records for
-- anything belonging to one tenant (read-only).
--
-- Both keys carry the unit's hash tag, so they share one slot.
-- KEYS[1]  rec  HASH records: field "<len(tenant)>:<tenant><key>" -> encoded record
-- KEYS[2]  ops  HASH idempotency records: op ID -> "<fingerprint>:<outcome>:<version>:<field>"
-- ARGV[1]  phase   "rec" or "ops": which hash to page through
-- ARGV[2]  cursor  HSCAN cursor (integer >= 0)
-- ARGV[3]  prefix  the tenant's record-field prefix, "<len(tenant)>:<tenant>" (non-empty)
-- ARGV[4]  count   HSCAN COUNT hint (integer 1..10000)
-- Reply: {next, found}: the next cursor ("0" when the hash was fully seen) and the first
--   record field or op ID of the tenant on this page ("" for none).
-- Invariant: read-only; one page per call, so a large bucket never blocks the shard.

local rec, ops = KEYS[1], KEYS[2]
local phase, cursor, prefix, count = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if phase ~= "rec" and phase ~= "ops" then
  return redis.error_reply("ERR routing tenantscan: phase must be rec or ops")
end
if not string.match(cursor or "", "^%d+$") then
  return redis.error_reply("ERR routing tenantscan: cursor must be an integer")
end
if prefix == nil or prefix == "" then
  return redis.error_reply("ERR routing tenantscan: empty prefix")
end
if not string.match(count or "", "^%d+$") or tonumber(count) < 1 or tonumber(count) > 10000 then
  return redis.error_reply("ERR routing tenantscan: count must be 1..10000")
end
local key = rec
if phase == "ops" then key = ops end
local page = redis.call("HSCAN", key, cursor, "COUNT", count)
local kv = page[2]
for i = 1, #kv, 2 do
  local field = kv[i]
  if phase == "ops" then field = string.match(kv[i + 1], "^[^:]*:[^:]*:[^:]*:(.*)$") or "" end
  if string.sub(field, 1, #prefix) == prefix then return {page[1], kv[i]} end
end
return {page[1], ""}
