-- peek_window.lua: read how many cells one budget slot (or one Approximate key) counts in
-- the sub-windows ending at the server's current one, as take.lua and sync.lua sum them.
-- Read-only: it writes nothing.
--
-- KEYS[1]  the base "<prefix>{<tag>}:<m>:<key>[:<slot>]"; the sub-window hashes
--          "<KEYS[1]>:<index>" (index = server milliseconds / sub) share its hash tag, hence
--          its slot. They are derived here because their names depend on the server's clock.
-- ARGV[1]  sub: sub-window length, milliseconds, 1..8.64e7
-- ARGV[2]  k: sub-windows summed, 1..1001
-- Reply: {now_ms, n_1, ..., n_k}: the server's clock and field n of each sub-window hash,
--   oldest first (0 where the hash is gone); bad arguments: an error 'ERR ratelimit: <what>'
-- Invariant: none to protect; the script never writes.
local base = KEYS[1]

local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end
local sub, k = int(ARGV[1]), int(ARGV[2])
if not sub or sub < 1 or sub > 86400000 then return redis.error_reply('ERR ratelimit: bad sub') end
if not k or k < 1 or k > 1001 then return redis.error_reply('ERR ratelimit: bad k') end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local cur = math.floor(now / sub)
local out = {now}
for i = 1, k do
  out[i + 1] = tonumber(redis.call('HGET', base .. ':' .. string.format('%.0f', cur - k + i), 'n') or '0')
end
return out
