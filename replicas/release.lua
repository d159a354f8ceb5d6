-- release.lua: give up a fill lease whose load failed, so another caller can take it now.
--
-- KEYS[1]  the lease key.
-- ARGV[1]  the holder's token.
-- ARGV[2]  how long the "given up" mark lasts, ms, > 0.
--
-- Reply: 1 when the lease was the caller's and is now marked free, 0 otherwise.
--
-- Invariant: only the holder frees its lease; a retried call changes nothing more.

local token, ms = ARGV[1], ARGV[2]
if not token or token == '' then
  return redis.error_reply('ERR replicas: bad lease token')
end
if not ms or not string.match(ms, '^%d+$') or tonumber(ms) <= 0 then
  return redis.error_reply('ERR replicas: bad mark ttl ' .. tostring(ms))
end
if redis.call('GET', KEYS[1]) ~= token then
  return 0
end
redis.call('SET', KEYS[1], 'f:' .. token, 'PX', ms)
return 1
