-- register.lua: add copies to a logical key's registry and read the key, in one step.
--
-- KEYS[1]  the logical key.
-- ARGV[1]  slots to register, "<slot>.<slot>..." (non-empty): the copies the caller is about
--          to fill from the returned record.
--
-- Reply: nil when KEYS[1] holds no record of this package; otherwise {raw, pttl}: the stored
-- value after registration and its remaining life in ms.
--
-- Invariant: registering before reading means that every write applied after this call
-- also reaches the registered copies, so a copy filled from the returned record can only be
-- overwritten by newer versions (set-if-newer), never left behind. Entries expire with the
-- record; the registry keeps at most 64 entries, newest first.

local add = ARGV[1]
if not add or not string.match(add, '^[%d.]+$') then
  return redis.error_reply('ERR replicas: bad registry ' .. tostring(add))
end
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local sv, sk, sreg, pos = string.match(raw, '^c1,(%d+),([vx]),([%d.:]*),()')
if not sv then return nil end
local pttl = redis.call('PTTL', KEYS[1])
if pttl <= 0 then return nil end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = now + pttl
local out, seen = {}, {}
for s in string.gmatch(add, '%d+') do
  if not seen[s] then seen[s] = true; out[#out + 1] = s .. ':' .. string.format('%.0f', cap) end
end
for s, e in string.gmatch(sreg, '(%d+):(%d+)') do
  if tonumber(e) > now and not seen[s] then seen[s] = true; out[#out + 1] = s .. ':' .. e end
end
local parts = {}
for i = 1, math.min(#out, 64) do parts[i] = out[i] end
local reg = table.concat(parts, '.')
if reg ~= sreg then
  raw = 'c1,' .. sv .. ',' .. sk .. ',' .. reg .. ',' .. string.sub(raw, pos)
  redis.call('SET', KEYS[1], raw, 'KEEPTTL')
end
return {raw, pttl}
