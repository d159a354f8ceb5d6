-- peek_gcra.lua: read a GCRA key's state as gcra.lua would judge it now. Read-only: it
-- writes nothing.
--
-- KEYS[1]  "<prefix>{<hash>}:g:<key>": the key's theoretical arrival time (TAT),
--          microseconds on this server's clock. One key, so one slot.
-- ARGV[1]  burst: cells admitted at once from idle, 1..2^40
-- ARGV[2]  rate: cells per period, 1..2^40
-- ARGV[3]  period, microseconds, 1..8.64e10
-- Reply: {remaining, reset_after_us, now_us}: the cells a request could take at once now and
--   how long until the key is back at burst, with gcra.lua's arithmetic; bad arguments or a
--   TAT that is not a number: an error 'ERR ratelimit: <what>'
-- Invariant: none to protect; the script never writes.
local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end
local burst, rate, period = int(ARGV[1]), int(ARGV[2]), int(ARGV[3])
if not burst or burst < 1 or burst > 1099511627776 then return redis.error_reply('ERR ratelimit: bad burst') end
if not rate or rate < 1 or rate > 1099511627776 then return redis.error_reply('ERR ratelimit: bad rate') end
if not period or period < 1 or period > 86400000000 then return redis.error_reply('ERR ratelimit: bad period') end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local t = period / rate
local tau = burst * t
local raw = redis.call('GET', KEYS[1])
local tat = now
if raw then
  tat = tonumber(raw)
  if not tat then return redis.error_reply('ERR ratelimit: the GCRA key holds no arrival time') end
end
if tat < now then tat = now end
local rem = math.max(0, math.min(burst, math.floor((now - (tat - tau)) / t)))
return {rem, math.ceil(tat - now), now}
