-- acquire.lua: read a logical key's primary record or take its fill lease, in one step.
--
-- KEYS[1]  the primary record "<prefix>{<tag>}k:<key>".
-- KEYS[2]  its lease "<prefix>{<tag>}l:<key>".
-- KEYS[3]  its waiter count "<prefix>{<tag>}n:<key>".
--          All share <tag>, so they live in one slot.
-- ARGV[1]  the caller's lease token (non-empty, no ':').
-- ARGV[2]  lease lifetime in ms, > 0.
-- ARGV[3]  copies to register when the record holds a live value, "<slot>.<slot>..." (may
--          be empty), as register.lua does.
--
-- Reply:
--   {"hit", raw}        KEYS[1] holds a live value (raw is the record after registration).
--   {"won"}             the caller holds the lease (taken now, or already its own).
--   {"wait", pttl}      another caller holds it for pttl ms more; the caller is counted as a
--                       waiter, and the filler pushes one element per waiter onto the wake
--                       list "<prefix>{<tag>}w:<key>".
--   {"absent"}          the source did not have the key (a negative record, for its TTL).
--   {"error", message}  the last load failed with message (an error record, for its TTL).
-- Lease states: "<token>" held; "f:<token>" filled or given up (free); "n:<token>" absent;
-- "e:<token>:<message>" failed.
--
-- Invariant: at most one token holds the lease at a time, and only until it expires.

local rec, lease, waiters = KEYS[1], KEYS[2], KEYS[3]
local token, ms, add = ARGV[1], ARGV[2], ARGV[3]
if not token or token == '' or string.find(token, ':', 1, true) then
  return redis.error_reply('ERR replicas: bad lease token')
end
if not ms or not string.match(ms, '^%d+$') or tonumber(ms) <= 0 then
  return redis.error_reply('ERR replicas: bad lease ttl ' .. tostring(ms))
end
if not add or not string.match(add, '^[%d.]*$') then
  return redis.error_reply('ERR replicas: bad registry ' .. tostring(add))
end
local raw = redis.call('GET', rec)
if raw then
  local sv, sk, sx, sreg, pos = string.match(raw, '^c2,(%d+),([vx]),(%d+),([%d.:]*),()')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if sv and sk == 'v' and tonumber(sx) > now then
    if add ~= '' then
      local ends, order = {}, {}
      for s, e in string.gmatch(sreg, '(%d+):(%d+)') do
        e = tonumber(e)
        if e > now and not ends[s] then ends[s] = e; order[#order + 1] = s end
      end
      local first, seen = {}, {}
      for s in string.gmatch(add, '%d+') do
        if not seen[s] then
          seen[s] = true
          ends[s] = math.max(ends[s] or 0, tonumber(sx))
          first[#first + 1] = s
        end
      end
      local parts = {}
      for _, s in ipairs(first) do
        if #parts < 64 then parts[#parts + 1] = s .. ':' .. string.format('%.0f', ends[s]) end
      end
      for _, s in ipairs(order) do
        if not seen[s] and #parts < 64 then parts[#parts + 1] = s .. ':' .. string.format('%.0f', ends[s]) end
      end
      local reg = table.concat(parts, '.')
      if reg ~= sreg then
        raw = 'c2,' .. sv .. ',' .. sk .. ',' .. sx .. ',' .. reg .. ',' .. string.sub(raw, pos)
        redis.call('SET', rec, raw, 'KEEPTTL')
      end
    end
    return {'hit', raw}
  end
end
local held = redis.call('GET', lease)
if held == token then
  return {'won'}
end
if held then
  local mark = string.sub(held, 1, 2)
  if mark == 'n:' then
    return {'absent'}
  elseif mark == 'e:' then
    local msg = string.match(held, '^e:[^:]*:(.*)$') or ''
    return {'error', msg}
  elseif mark ~= 'f:' then
    local pttl = redis.call('PTTL', lease)
    redis.call('INCR', waiters)
    redis.call('PEXPIRE', waiters, math.max(pttl, 1) + tonumber(ms))
    return {'wait', pttl}
  end
end
redis.call('SET', lease, token, 'PX', ms)
return {'won'}
