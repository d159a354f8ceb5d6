-- renew.lua: keep a fill lease while its holder loads and fills, so that a holder that is
-- alive but slow (a long query, a loaded machine, a fill waiting for a connection) is not
-- taken over: only a holder that stopped renewing (dead, paused, cut off) loses its lease.
--
-- KEYS[1]  the primary record "<prefix>{<tag>}k:<key>" (holds the lease when it holds no
--          record).
-- KEYS[2]  the side lease "<prefix>{<tag>}l:<key>". Both share <tag>: one slot.
-- ARGV[1]  the holder's token "<id>.<deadline>" (non-empty, no ','); only <id> is compared.
-- ARGV[2]  lease lifetime in ms, > 0.
--
-- Reply: {"ok", token} when the lease is still the caller's: its deadline is now the server's
-- TIME + ARGV[2] (token carries it), its waiter count is kept, and its marker lives at least
-- that long; {"lost"} when the lease is someone else's or gone.
--
-- Invariant: only the holder's own live lease is extended; nothing else is written.

local primary, side = KEYS[1], KEYS[2]
local token, ms = ARGV[1], ARGV[2]
if not token or token == '' or string.find(token, ',', 1, true) then
  return redis.error_reply('ERR replicas: bad lease token')
end
if not ms or not string.match(ms, '^%d+$') or tonumber(ms) <= 0 then
  return redis.error_reply('ERR replicas: bad lease ttl ' .. tostring(ms))
end
local id = string.match(token, '^[^.]*')
for _, k in ipairs({primary, side}) do
  local held = redis.call('GET', k)
  local tok, n = nil, nil
  if held then tok, n = string.match(held, '^l2,([^,]*),(%d+)$') end
  if tok and string.match(tok, '^[^.]*') == id then
    -- Still its own, even past its deadline when no waiter took it over yet.
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local renewed = id .. '.' .. string.format('%.0f', now + tonumber(ms))
    redis.call('SET', k, 'l2,' .. renewed .. ',' .. n, 'KEEPTTL')
    if redis.call('PTTL', k) < tonumber(ms) then
      redis.call('PEXPIRE', k, ms)
    end
    return {'ok', renewed}
  end
end
return {'lost'}
