-- acquire.lua: read a logical key or take its fill lease, in one step.
--
-- KEYS[1]  the logical key.
-- KEYS[2]  its lease, "<prefix>{<tag of KEYS[1]'s slot>}lease:<key>", in KEYS[1]'s slot.
-- ARGV[1]  the caller's lease token (non-empty, never starting with "f:").
-- ARGV[2]  lease lifetime in ms, > 0.
--
-- Reply: {"hit", raw} when KEYS[1] holds a value; {"won"} when the caller holds the lease
-- (taken now, or already its own: a retried call); {"wait"} when another caller holds it.
-- A lease marked "f:<token>" was filled or given up and is free to take.
--
-- Invariant: at most one token holds the lease at a time, and only until it expires.

local token, ms = ARGV[1], ARGV[2]
if not token or token == '' or string.sub(token, 1, 2) == 'f:' then
  return redis.error_reply('ERR replicas: bad lease token')
end
if not ms or not string.match(ms, '^%d+$') or tonumber(ms) <= 0 then
  return redis.error_reply('ERR replicas: bad lease ttl ' .. tostring(ms))
end
local raw = redis.call('GET', KEYS[1])
if raw and string.match(raw, '^c1,%d+,v,') then
  return {'hit', raw}
end
local lease = redis.call('GET', KEYS[2])
if lease == token then
  return {'won'}
end
if lease and string.sub(lease, 1, 2) ~= 'f:' then
  return {'wait'}
end
redis.call('SET', KEYS[2], token, 'PX', ms)
return {'won'}
