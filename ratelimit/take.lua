-- take.lua: take up to want cells from one budget slot of one key for the current
-- sub-window, exactly once per request ID, and count the key's requests for the fleet's
-- rate estimate (Options.HotRate).
--
-- KEYS[1]  the slot's base "<prefix>{<tag>}:<m>:<key>:<slot>". The slot's sub-window hashes
--          are "<KEYS[1]>:<index>" (index = server milliseconds / sub), with fields n (cells
--          granted in that sub-window), r:<id> (the grant of request id) and c (requests
--          counted in that sub-window, for the rate estimate only; older versions of this
--          script neither write nor read it, and it never counts towards a limit). They are
--          derived here because their names depend on the server's clock; they share
--          KEYS[1]'s hash tag, hence its slot.
-- ARGV[1]  budget: the slot's share of the limit, 1..2^40
-- ARGV[2]  want: cells asked for, 1..budget
-- ARGV[3]  least: the fewest cells worth granting, 1..want (want for all-or-nothing)
-- ARGV[4]  sub: sub-window length, milliseconds, 1..8.64e7
-- ARGV[5]  k: sub-windows summed, 1..1001 (SubWindows+1 for Sliding, 1 for Fixed)
-- ARGV[6]  id: request ID, 1..64 bytes
-- ARGV[7]  hits: requests to add to the current sub-window's c, 0..2^40; absent: count
--          nothing and reply seen -1
-- Reply: {status, granted, remaining, ms, reset_ms, now_ms, seen}
--   seen is the sum of c over the k+1 sub-windows up to the current one (this call's hits
--   included; k full sub-windows and the current one's elapsed part), or -1 with 'dup' or
--   without ARGV[7]
--   {'ok', g, rem, ms, reset, now}   g cells granted in the current sub-window, which
--                                   ends in ms; rem cells left in the slot's window
--   {'dup', g, 0, ms, 0, now, -1}    id was already granted g cells in a sub-window that
--                                   ends in ms (ms <= 0: it has ended); nothing written
--   {'empty', 0, rem, ms, reset, now, seen} fewer than least cells left; nothing written but
--                                   the hits; ms is when enough will be free again (-1:
--                                   never, least > budget)
--   bad arguments: an error 'ERR ratelimit: <what>', before any write
-- Invariant: for every k consecutive sub-windows, the cells granted by this slot sum to at
-- most budget; a request ID is granted at most once while its grant is inside the window.
-- c never enters a grant decision. A retried request ID that was granted adds its hits
-- once; a retried denied request adds them again (the estimate may overcount, the limit
-- never does).
local base = KEYS[1]

local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end

local budget = int(ARGV[1])
local want = int(ARGV[2])
local least = int(ARGV[3])
local sub = int(ARGV[4])
local k = int(ARGV[5])
local id = ARGV[6]
-- Without ARGV[7] (Options.HotRate off) nothing is counted and seen is -1: the estimate
-- costs nothing to a limiter that does not use it.
local counting = ARGV[7] ~= nil
local hits = 0
if counting then hits = int(ARGV[7]) end
if not budget or budget < 1 or budget > 1099511627776 then return redis.error_reply('ERR ratelimit: bad budget') end
if not want or want < 1 or want > budget then return redis.error_reply('ERR ratelimit: bad want') end
if not least or least < 1 or least > want then return redis.error_reply('ERR ratelimit: bad least') end
if not sub or sub < 1 or sub > 86400000 then return redis.error_reply('ERR ratelimit: bad sub-window') end
if not k or k < 1 or k > 1001 then return redis.error_reply('ERR ratelimit: bad sub-window count') end
if type(id) ~= 'string' or #id < 1 or #id > 64 then return redis.error_reply('ERR ratelimit: bad request id') end
if not hits or hits > 1099511627776 then return redis.error_reply('ERR ratelimit: bad hits') end

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local cur = math.floor(now / sub)
local field = 'r:' .. id

local used, ns = 0, {}
for i = 1, k do
  local j = cur - k + i
  local v = redis.call('HMGET', base .. ':' .. string.format('%.0f', j), 'n', field)
  if v[2] then
    return {'dup', tonumber(v[2]), 0, (j + 1) * sub - now, 0, now, -1}
  end
  ns[i] = tonumber(v[1]) or 0
  used = used + ns[i]
end

-- seen: the requests counted over sub-windows cur-k..cur. Sub-window cur-k's hash lives
-- until (cur+1)*sub, so it is still there. The current one's count is added with the hits
-- below, where it is written.
local key = base .. ':' .. string.format('%.0f', cur)
local seen = -1
if counting then
  seen = hits
  for i = 0, k do
    local c = redis.call('HGET', base .. ':' .. string.format('%.0f', cur - k + i), 'c')
    seen = seen + (tonumber(c) or 0)
  end
end
if hits > 0 then
  redis.call('HINCRBY', key, 'c', hits)
  redis.call('PEXPIREAT', key, (cur + k + 1) * sub)
end

-- reset: when every cell counted now has left the window.
local reset = 0
for i = k, 1, -1 do
  if ns[i] > 0 then reset = (cur + i) * sub - now; break end
end

local avail = budget - used
if avail < least then
  local need, freed, at = least - avail, 0, -1
  for i = 1, k do
    freed = freed + ns[i]
    if freed >= need then at = (cur + i) * sub - now; break end
  end
  return {'empty', 0, math.max(avail, 0), at, reset, now, seen}
end

local g = math.min(want, avail)
redis.call('HINCRBY', key, 'n', g)
redis.call('HSET', key, field, g)
redis.call('PEXPIREAT', key, (cur + k + 1) * sub)
return {'ok', g, avail - g, (cur + 1) * sub - now, (cur + k) * sub - now, now, seen}
