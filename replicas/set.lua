-- set.lua: versioned set-if-newer of one stored record (a logical key or one of its copies),
-- optionally as the fill of a GetOrLoad lease.
--
-- KEYS[1]  the record: a logical key, or one copy key "<prefix>{<tag>}<key>".
-- KEYS[2]  optional, only for fills: the lease "<prefix>{<tag of KEYS[1]'s slot>}lease:<key>".
--          Its hash tag is chosen so that it lives in KEYS[1]'s slot.
-- ARGV[1]  version: decimal uint64, no leading zeros.
-- ARGV[2]  kind: "v" (value) or "x" (tombstone).
-- ARGV[3]  data: the host's bytes (empty for a tombstone).
-- ARGV[4]  ttl in milliseconds, > 0. A tombstone is kept longer while live registry entries
--          last (so the copies they list stay covered).
-- ARGV[5]  registry slots to add, "<slot>.<slot>..." (may be empty): the copies the writer
--          keeps current. Only logical keys carry a registry; copies are written with "".
-- ARGV[6]  lease token (with KEYS[2] only).
-- ARGV[7]  how long the lease keeps its "filled" mark, ms (with KEYS[2] only).
--
-- Stored format: "c1,<version>,<kind>,<registry>,<data>", registry entries "<slot>:<expiry ms>"
-- joined by ".".
--
-- Reply: {status, slot1, remaining ms 1, slot2, remaining ms 2, ...}
--   status  1: applied.
--           0: this version with this kind is already stored (a retry); only the registry
--              may have grown.
--          -1 and -2 carry no pairs.
--          -1: refused: a newer version is stored, or the same version with the other kind.
--          -2: refused: the lease token is not the current one (expired or superseded).
--   The pairs list the live registry entries after the call, each with its remaining life.
--
-- Invariants: a record never moves to an older version, so retries and late writes are
-- harmless; a tombstone refuses every write of its version or older; a registry entry never
-- outlives the record holding it, and a tombstone never cuts one short; a fill whose lease is
-- gone changes nothing.

local version, kind, data, ttl, add = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not string.match(version, '^%d+$') or #version > 20 or (#version > 1 and string.sub(version, 1, 1) == '0') then
  return redis.error_reply('ERR replicas: bad version ' .. tostring(version))
end
if kind ~= 'v' and kind ~= 'x' then
  return redis.error_reply('ERR replicas: bad kind ' .. tostring(kind))
end
if not string.match(ttl, '^%d+$') or tonumber(ttl) <= 0 then
  return redis.error_reply('ERR replicas: bad ttl ' .. tostring(ttl))
end
if not string.match(add, '^[%d.]*$') then
  return redis.error_reply('ERR replicas: bad registry ' .. tostring(add))
end
local token, filled = nil, nil
if #KEYS == 2 then
  token, filled = ARGV[6], ARGV[7]
  if not token or token == '' or not filled or not string.match(filled, '^%d+$') or tonumber(filled) <= 0 then
    return redis.error_reply('ERR replicas: bad lease arguments')
  end
  local lease = redis.call('GET', KEYS[2])
  if lease ~= token and lease ~= 'f:' .. token then
    return {-2}
  end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

-- merge returns the registry with the slots in add (expiring at cap) and the live entries of
-- reg (cut to cap), newest first, at most 64 entries, and the reply pairs.
local function merge(reg, cap)
  local out, seen = {}, {}
  for s in string.gmatch(add, '%d+') do
    if not seen[s] then seen[s] = true; out[#out + 1] = {s, cap} end
  end
  for s, e in string.gmatch(reg, '(%d+):(%d+)') do
    e = math.min(tonumber(e), cap)
    if e > now and not seen[s] then seen[s] = true; out[#out + 1] = {s, e} end
  end
  local parts, pairs_ = {}, {}
  for i = 1, math.min(#out, 64) do
    parts[i] = out[i][1] .. ':' .. string.format('%.0f', out[i][2])
    pairs_[#pairs_ + 1] = tonumber(out[i][1])
    pairs_[#pairs_ + 1] = out[i][2] - now
  end
  return table.concat(parts, '.'), pairs_
end

local function reply(status, pairs_)
  local r = {status}
  for i = 1, #pairs_ do r[#r + 1] = pairs_[i] end
  return r
end

local raw = redis.call('GET', KEYS[1])
local sv, sk, sreg, pos = nil, nil, '', nil
if raw then
  sv, sk, sreg, pos = string.match(raw, '^c1,(%d+),([vx]),([%d.:]*),()')
end

local status
if sv and (newer(sv, version) or (sv == version and sk ~= kind)) then
  status = -1
elseif sv and sv == version then
  status = 0
  local pttl = redis.call('PTTL', KEYS[1])
  local cap = now + (pttl > 0 and pttl or tonumber(ttl))
  local reg, pairs_ = merge(sreg, cap)
  if reg ~= sreg then
    redis.call('SET', KEYS[1], 'c1,' .. sv .. ',' .. sk .. ',' .. reg .. ',' .. string.sub(raw, pos), 'KEEPTTL')
  end
  if token then redis.call('SET', KEYS[2], 'f:' .. token, 'PX', filled) end
  return reply(0, pairs_)
else
  status = 1
end

if status == -1 then
  if token then redis.call('SET', KEYS[2], 'f:' .. token, 'PX', filled) end
  return {-1}
end

local life = tonumber(ttl)
if kind == 'x' then
  -- A tombstone keeps the registry as long as a registered copy may live: a copy this
  -- delete fails to reach keeps the old value and its TTL, and must stay listed for writers.
  for e in string.gmatch(sreg or '', '%d+:(%d+)') do life = math.max(life, tonumber(e) - now) end
  data = ''
end
local reg, pairs_ = merge(sreg or '', now + life)
redis.call('SET', KEYS[1], 'c1,' .. version .. ',' .. kind .. ',' .. reg .. ',' .. data, 'PX', string.format('%.0f', life))
if token then redis.call('SET', KEYS[2], 'f:' .. token, 'PX', filled) end
return reply(1, pairs_)
