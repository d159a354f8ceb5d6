-- copy.lua: versioned set-if-newer of one copy of a logical key.
--
-- KEYS[1]  the copy "<prefix>{<tag>}c:<key>".
-- ARGV[1]  version: decimal uint64, no leading zeros.
-- ARGV[2]  kind: "v" (value) or "x" (tombstone).
-- ARGV[3]  data: the host's bytes (empty for a tombstone).
-- ARGV[4]  when the copy's value ends, Unix ms (the primary's expiry, jittered shorter).
-- ARGV[5]  when the copy's registration at the primary ends, Unix ms: the copy never
--          outlives it, and a write arriving after it changes nothing.
--
-- Reply: {status}: "applied" (written; a value already expired is written as a ghost that
-- refuses older versions); "late" (the registration had ended: nothing written); "stale" (a
-- newer version is stored, live or as a ghost); "conflict" (this version with other content).
--
-- Invariant: a copy never moves to an older version while its key lives, and its key never
-- lives past the latest registration written to it, so a copy is always reachable by the
-- writers of its primary. A late write carries its absolute registration end, so delay in
-- flight cannot stretch its life. Every argument is checked before any write.

local copy = KEYS[1]
local version, kind, data, vexp, kexp = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not version or not string.match(version, '^%d+$') or #version > 20 or (#version > 1 and string.sub(version, 1, 1) == '0') then
  return redis.error_reply('ERR replicas: bad version ' .. tostring(version))
end
if kind ~= 'v' and kind ~= 'x' then
  return redis.error_reply('ERR replicas: bad kind ' .. tostring(kind))
end
if not vexp or not string.match(vexp, '^%d+$') or not kexp or not string.match(kexp, '^%d+$') then
  return redis.error_reply('ERR replicas: bad expiry ' .. tostring(vexp) .. ' ' .. tostring(kexp))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
kexp, vexp = tonumber(kexp), tonumber(vexp)
if kexp <= now then
  return {'late'}
end
vexp = math.min(vexp, kexp)

local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

local raw = redis.call('GET', copy)
local keep = kexp
if raw then
  local sv, sk, sx, _, pos = string.match(raw, '^c2,(%d+),([vx]),(%d+),([%d.:]*),()')
  if sv then
    if newer(sv, version) then return {'stale'} end
    if sv == version then
      if sk ~= kind or string.sub(raw, pos) ~= data then return {'conflict'} end
      vexp = math.max(vexp, tonumber(sx))
    end
  end
  local pttl = redis.call('PTTL', copy)
  if pttl > 0 then keep = math.max(keep, now + pttl) end
end
redis.call('SET', copy, 'c2,' .. version .. ',' .. kind .. ',' .. string.format('%.0f', vexp) .. ',,' .. data,
  'PXAT', string.format('%.0f', keep))
return {'applied'}
