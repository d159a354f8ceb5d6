-- write.lua: one guarded, idempotent write (Put or Delete, optionally conditional on the
-- record's version) to the versioned record store of one placement unit.
--
-- All six keys carry the unit's hash tag "{<prefix>:<unit>}", so they share one hash slot;
-- the ownership check, the idempotency record, the data change and the change-log entry are
-- therefore one atomic step on one shard, and everything travels together when the unit moves.
-- KEYS[1]  own   HASH   ownership record: gen, state, "x:<tenant>" for tenants moved out, and
--                       "vfloor": the highest version of a tombstone purged here
-- KEYS[2]  rec   HASH   record field -> "<version>:l:<value>" or "<version>:t:" (tombstone)
-- KEYS[3]  ops   HASH   op key -> "<fingerprint>:<outcome>:<version>:<field>"; the op key is the
--                       op ID scoped by its tenant, "<#tenant>:<tenant><opid>" (routing's OpKey),
--                       or the bare op ID in records written before op IDs were scoped
-- KEYS[4]  opx   ZSET   op key scored by its expiry, unix ms
-- KEYS[5]  tomb  ZSET   record field scored by the tombstone's expiry, unix ms
-- KEYS[6]  log   STREAM change log, one entry per recorded operation
-- ARGV[1]  gen      route generation the caller routed with (integer >= 1)
-- ARGV[2]  tenant   tenant (non-empty); refused if marked as moved out of this unit
-- ARGV[3]  opid     operation ID (non-empty)
-- ARGV[4]  fp       fingerprint of the operation (non-empty, no ':')
-- ARGV[5]  kind     "put" or "del"
-- ARGV[6]  field    record field (non-empty)
-- ARGV[7]  check    "1": the current version must equal ARGV[8] (0 = absent or deleted); "0": no check
-- ARGV[8]  expect   expected version (integer >= 0)
-- ARGV[9]  value    value to store (put only)
-- ARGV[10] now      current time, unix ms (integer)
-- ARGV[11] opttl    idempotency-record retention, ms (integer >= 1)
-- ARGV[12] tombttl  tombstone retention, ms (integer >= 1)
-- ARGV[13] logmax   approximate change-log length cap (integer, 0 = no cap)
-- Reply (all strings):
--   {"stale", gen, state, moved}  the ownership record does not admit this generation; nothing written
--   {"conflict", fingerprint}     the op ID is recorded for a different operation (fingerprint or
--                                 record field differ); nothing written
--   {"dup", outcome, version}     the op ID is recorded for this operation: its first result
--   {"done", outcome, version}    recorded now; outcome "ok", "mismatch" or "absent"
-- Invariant: a write lands only while the unit is open here at a generation <= the caller's;
-- every recorded operation leaves exactly one op record and one change-log entry; an op ID
-- is applied at most once per tenant while its record lives (another tenant's use of the same
-- ID, in a shared bucket, is another operation); a record's version never goes backwards,
-- not even after its tombstone was purged (a new record starts above "vfloor").

local own_key, rec_key, ops_key, opx_key, tomb_key, log_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local function int(s, name, min)
  if type(s) ~= "string" or not string.match(s, "^%d+$") then
    return redis.error_reply("ERR routing write: " .. name .. " must be an integer")
  end
  local n = tonumber(s)
  if n < min then
    return redis.error_reply("ERR routing write: " .. name .. " must be >= " .. min)
  end
  return n
end

local function str(n) return string.format("%d", n) end

if #KEYS ~= 6 or #ARGV ~= 13 then
  return redis.error_reply("ERR routing write: want 6 keys and 13 arguments")
end

local gen = int(ARGV[1], "gen", 1)
if type(gen) == "table" then return gen end
local tenant, opid, fp, kind, field = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if tenant == "" then return redis.error_reply("ERR routing write: empty tenant") end
if opid == "" then return redis.error_reply("ERR routing write: empty op ID") end
if fp == "" or string.find(fp, ":", 1, true) then
  return redis.error_reply("ERR routing write: bad fingerprint")
end
if kind ~= "put" and kind ~= "del" then return redis.error_reply("ERR routing write: bad kind") end
if field == "" then return redis.error_reply("ERR routing write: empty field") end
local check = ARGV[7]
if check ~= "0" and check ~= "1" then return redis.error_reply("ERR routing write: bad check") end
local expect = int(ARGV[8], "expect", 0)
if type(expect) == "table" then return expect end
local value = ARGV[9]
local now = int(ARGV[10], "now", 0)
if type(now) == "table" then return now end
local opttl = int(ARGV[11], "opttl", 1)
if type(opttl) == "table" then return opttl end
local tombttl = int(ARGV[12], "tombttl", 1)
if type(tombttl) == "table" then return tombttl end
local logmax = int(ARGV[13], "logmax", 0)
if type(logmax) == "table" then return logmax end

-- 1. Ownership.
local own = redis.call("HMGET", own_key, "gen", "state")
local ogen, ostate = own[1] or "0", own[2] or ""
if ostate ~= "open" or tonumber(ogen) > gen then
  return {"stale", ogen, ostate, "0"}
end
if redis.call("HEXISTS", own_key, "x:" .. tenant) == 1 then
  return {"stale", ogen, ostate, "1"}
end

-- 2. Idempotency, per tenant: the op record lives under the op key. A record stored under
-- the bare op ID (written before op IDs were scoped) is this operation's only if it names
-- one of this tenant's fields (or no field, as the oldest records do).
local opkey = str(#tenant) .. ":" .. tenant .. opid
local prev = redis.call("HGET", ops_key, opkey)
if not prev then
  local legacy = redis.call("HGET", ops_key, opid)
  local lfield = legacy and (string.match(legacy, "^[^:]*:[^:]*:%d+:(.*)$") or "")
  local mine = str(#tenant) .. ":" .. tenant
  if legacy and (lfield == "" or string.sub(lfield, 1, #mine) == mine) then prev = legacy end
end
if prev then
  -- The stored field (absent in records written before it was added) must match as well:
  -- the fingerprint is a 64-bit hash, the field is exact.
  local pfp, pout, pver, pfield = string.match(prev, "^([^:]*):([^:]*):(%d+):?(.*)$")
  if pfp ~= fp or (pfield ~= "" and pfield ~= field) then return {"conflict", tostring(pfp)} end
  return {"dup", pout, pver}
end

-- 3. Apply.
local cur = redis.call("HGET", rec_key, field)
local cver, live = 0, false
if cur then
  local v, f = string.match(cur, "^(%d+):(%a):")
  cver, live = tonumber(v), f == "l"
else
  cver = tonumber(redis.call("HGET", own_key, "vfloor") or "0") or 0
end
local seen = live and cver or 0
local outcome, ver, logkind, rec, tombexp = "ok", 0, "noop", "", "0"
if check == "1" and seen ~= expect then
  outcome, ver = "mismatch", seen
elseif kind == "put" then
  ver = cver + 1
  rec = str(ver) .. ":l:" .. value
  redis.call("HSET", rec_key, field, rec)
  redis.call("ZREM", tomb_key, field)
  logkind = "put"
elseif live then
  ver = cver + 1
  rec = str(ver) .. ":t:"
  redis.call("HSET", rec_key, field, rec)
  tombexp = str(now + tombttl)
  redis.call("ZADD", tomb_key, tombexp, field)
  logkind = "del"
else
  outcome, ver = "absent", 0
end

-- 4. Record the op and log it.
local oprec = fp .. ":" .. outcome .. ":" .. str(ver) .. ":" .. field
local opexp = str(now + opttl)
redis.call("HSET", ops_key, opkey, oprec)
redis.call("ZADD", opx_key, opexp, opkey)
if logmax > 0 then
  redis.call("XADD", log_key, "MAXLEN", "~", str(logmax), "*",
    "k", logkind, "f", field, "r", rec, "o", opkey, "op", oprec, "x", opexp, "tx", tombexp)
else
  redis.call("XADD", log_key, "*",
    "k", logkind, "f", field, "r", rec, "o", opkey, "op", oprec, "x", opexp, "tx", tombexp)
end

-- 5. Amortised retention: drop a few expired op records and tombstones.
local expired = redis.call("ZRANGEBYSCORE", opx_key, "-inf", str(now), "LIMIT", 0, 16)
for _, id in ipairs(expired) do
  redis.call("HDEL", ops_key, id)
  redis.call("ZREM", opx_key, id)
end
local dead = redis.call("ZRANGEBYSCORE", tomb_key, "-inf", str(now), "LIMIT", 0, 16)
local floor = 0
for _, f in ipairs(dead) do
  local r = redis.call("HGET", rec_key, f)
  local tv = r and string.match(r, "^(%d+):t:")
  if tv then
    redis.call("HDEL", rec_key, f)
    floor = math.max(floor, tonumber(tv))
  end
  redis.call("ZREM", tomb_key, f)
end
if floor > 0 and floor > (tonumber(redis.call("HGET", own_key, "vfloor") or "0") or 0) then
  redis.call("HSET", own_key, "vfloor", str(floor))
end

return {"done", outcome, str(ver)}
