-- fleet.lua: record an instance in its fleet's roll, unless another prefix is live there.
--
-- KEYS[1]  the fleet roll, Options.FleetKey (a sorted set, one slot): members
--          "<instance>:<prefix>", scores the end of each member's life (Unix ms).
-- ARGV[1]  the caller's member "<instance>:<prefix>" (<instance> non-empty, no ':').
-- ARGV[2]  the member's life in ms, > 0.
--
-- Reply:
--   {"ok"}                the caller is recorded (or its life renewed) until now + life.
--   {"mismatch", prefix}  a live member has another prefix: the caller is not recorded.
--
-- Invariant: the live members of a roll share one prefix; the first prefix recorded keeps
-- the roll until its last instance leaves or stops renewing. Retrying a call changes
-- nothing more (a member is renewed, never duplicated).

local roll = KEYS[1]
local member, life = ARGV[1], ARGV[2]
if not member or not string.match(member, '^[^:]+:') then
  return redis.error_reply('ERR replicas: bad fleet member')
end
if not life or not string.match(life, '^%d+$') or tonumber(life) <= 0 then
  return redis.error_reply('ERR replicas: bad fleet life ' .. tostring(life))
end
local prefix = string.sub(member, #string.match(member, '^[^:]+:') + 1)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', roll, '-inf', now)
for _, m in ipairs(redis.call('ZRANGE', roll, 0, -1)) do
  local p = string.sub(m, #(string.match(m, '^[^:]*:') or '') + 1)
  if p ~= prefix then
    return {'mismatch', p}
  end
end
redis.call('ZADD', roll, now + tonumber(life), member)
redis.call('PEXPIRE', roll, life)
return {'ok'}
