-- register.lua: add copies to a logical key's registry and read its primary record, in one
-- step. Built after registry.lua, whose merge() it uses.
--
-- KEYS[1]  the primary record "<prefix>{<tag>}k:<key>".
-- ARGV[1]  slots to register, "<slot>.<slot>..." (non-empty): the copies the caller is about
--          to fill from the returned record.
--
-- Reply: {"none"} when KEYS[1] holds no live value or tombstone of this package; otherwise
-- {"ok", raw}: raw is the record after registration (its registry lists every live entry
-- with its end).
--
-- Invariant: registering before reading means that every write applied after this call
-- also reaches the registered copies, so a copy filled from the returned record can only be
-- overwritten by newer versions (set-if-newer), never left behind. A new entry ends with the
-- record's value, which the key already outlives; no entry is ever shortened.

local rec, add = KEYS[1], ARGV[1]
if not add or not string.match(add, '^[%d.]+$') then
  return redis.error_reply('ERR replicas: bad registry ' .. tostring(add))
end
local raw = redis.call('GET', rec)
if not raw then return {'none'} end
local sv, sk, sx, sreg, pos = string.match(raw, '^c2,(%d+),([vx]),(%d+),([%d.:]*),()')
if not sv then return {'none'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = tonumber(sx)
if expiry == 0 then
  -- Never replicated: the key's TTL is the value's; registering needs it as a time.
  expiry = now + math.max(redis.call('PTTL', rec), 1)
  sx = string.format('%.0f', expiry)
elseif expiry <= now then
  return {'none'}
end

local reg = merge(sreg, add, expiry, now)
if reg ~= sreg or raw ~= 'c2,' .. sv .. ',' .. sk .. ',' .. sx .. ',' .. sreg .. ',' .. string.sub(raw, pos) then
  raw = 'c2,' .. sv .. ',' .. sk .. ',' .. sx .. ',' .. reg .. ',' .. string.sub(raw, pos)
  redis.call('SET', rec, raw, 'KEEPTTL')
end
return {'ok', raw}
