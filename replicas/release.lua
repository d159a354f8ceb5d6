-- release.lua: end a fill lease whose load did not produce a value, leaving what the fleet
-- should answer until the next load, and wake the callers waiting for it.
--
-- KEYS[1]  the primary record "<prefix>{<tag>}k:<key>" (holds the lease when it holds no
--          record).
-- KEYS[2]  the side lease "<prefix>{<tag>}l:<key>".
-- KEYS[3]  the wake list "<prefix>{<tag>}w:<key>". All three share <tag>: one slot.
-- ARGV[1]  the holder's token (non-empty, no ','; its <id> is compared, see same()).
-- ARGV[2]  mode: "f" (given up: the next caller loads), "n" (the source does not have the
--          key), "e" (the load failed).
-- ARGV[3]  how long the mark lasts, ms, > 0 (NegativeTTL for "n", ErrorTTL for "e").
-- ARGV[4]  the error's text (mode "e"; may be empty).
--
-- Reply: {"ok"} when the lease was the caller's and is now marked, {"none"} otherwise.
--
-- Invariant: only the holder marks its lease; a retried call changes nothing more.

local primary, side, wake = KEYS[1], KEYS[2], KEYS[3]
local token, mode, ms, msg = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or ''
if not token or token == '' or string.find(token, ',', 1, true) then
  return redis.error_reply('ERR replicas: bad lease token')
end
if mode ~= 'f' and mode ~= 'n' and mode ~= 'e' then
  return redis.error_reply('ERR replicas: bad release mode ' .. tostring(mode))
end
if not ms or not string.match(ms, '^%d+$') or tonumber(ms) <= 0 then
  return redis.error_reply('ERR replicas: bad mark ttl ' .. tostring(ms))
end
-- same says two lease tokens are one holder's: "<id>.<deadline>" names its holder by <id>
-- (renew.lua moves the deadline on while the holder works).
local function same(a, b)
  return a ~= nil and b ~= nil and string.match(a, '^[^.]*') == string.match(b, '^[^.]*')
end

local k, n = nil, 0
for _, key in ipairs({primary, side}) do
  local held = redis.call('GET', key)
  local tok, waiters = nil, nil
  if held then tok, waiters = string.match(held, '^l2,([^,]*),(%d+)$') end
  if same(tok, token) then k, n = key, tonumber(waiters); break end
end
if not k then return {'none'} end
if mode == 'f' then
  redis.call('DEL', k)
elseif mode == 'n' then
  redis.call('SET', k, 'n2,' .. token, 'PX', ms)
else
  redis.call('SET', k, 'e2,' .. token .. ',' .. msg, 'PX', ms)
end
if n > 0 then
  for _ = 1, math.min(n, 1000) do redis.call('RPUSH', wake, '1') end
  redis.call('PEXPIRE', wake, math.max(tonumber(ms), 1000))
end
return {'ok'}
