-- add.lua: count one event in one stripe, exactly once.
--
-- KEYS[1]  the stripe hash "<prefix>{<tag>}:<name>:<gen>:<i>" (fields g, n, i, v, maxt,
--          end, sealed). The dedup sets of the stripe are "<KEYS[1]>:d:<slice>:<depth>:<sel>";
--          they are derived here rather than declared because their names depend on the
--          stored split depth, and they share KEYS[1]'s hash tag, hence its slot.
-- ARGV[1]  generation the caller routed to (must equal field g)
-- ARGV[2]  dedup record: the event's hashed ID, a positive decimal integer below 2^63
-- ARGV[3]  delta: a non-zero decimal int64
-- ARGV[4]  event time, Unix milliseconds
-- ARGV[5]  dedup window, milliseconds
-- ARGV[6]  slice width, milliseconds
-- ARGV[7]  largest dedup set before it is split
-- ARGV[8]  1 if the caller named the generation explicitly (skip the boundary check)
--
-- Reply: {code, value}
--   {1, 0}    applied
--   {2, 0}    duplicate: the record was already present; nothing written
--   {3, 0}    the stripe is sealed (generation folded) and the event is before its boundary
--             (or names the generation): too old; nothing written
--   {4, now}  event time is more than one window behind the server clock; nothing written
--   {5, now}  event time is more than one window ahead of the server clock; nothing written
--   {6, end}  event time is at or past this stripe's boundary (checked before sealed, the
--             window and the clock): route to the next generation
--   {7, 0}    the stripe key does not exist
--   {8, g}    the stripe belongs to generation g, not ARGV[1]
--   {9, 0}    the delta would overflow the stripe's int64 value; nothing written
--
-- Invariant: the record is added and the value incremented together, or neither; a record
-- is always found by a later lookup of the same member (splits move records to the child
-- chosen by their own bits, and lookups follow split markers), and it lives until its slice
-- ends plus one window plus one slice, while the time check refuses events whose slice may
-- have expired. Hence a retry inside the window never counts twice.

local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%-?%d+$') or #s > 20 then return nil end
  return tonumber(s)
end

local gen = int(ARGV[1])
local member = ARGV[2]
local delta = ARGV[3]
local t = int(ARGV[4])
local window = int(ARGV[5])
local slice = int(ARGV[6])
local setmax = int(ARGV[7])
local explicit = ARGV[8]
if not gen or gen < 1 then return redis.error_reply('ERR stripes: bad generation') end
if type(member) ~= 'string' or not string.match(member, '^[1-9]%d*$') or #member > 19
    or (#member == 19 and member > '9223372036854775807') then
  return redis.error_reply('ERR stripes: bad dedup record')
end
-- delta: an int64 in decimal, not zero.
local function int64(s)
  local digits = string.match(s, '^%-?([1-9]%d*)$')
  if not digits or #digits > 19 then return false end
  if #digits < 19 then return true end
  if string.sub(s, 1, 1) == '-' then return digits <= '9223372036854775808' end
  return digits <= '9223372036854775807'
end
if type(delta) ~= 'string' or not int64(delta) then return redis.error_reply('ERR stripes: bad delta') end
if not t or t < 0 then return redis.error_reply('ERR stripes: bad event time') end
if not window or window < 1 then return redis.error_reply('ERR stripes: bad window') end
if not slice or slice < 1 or slice > window then return redis.error_reply('ERR stripes: bad slice') end
if not setmax or setmax < 2 then return redis.error_reply('ERR stripes: bad set size') end
if explicit ~= '0' and explicit ~= '1' then return redis.error_reply('ERR stripes: bad mode') end

local st = redis.call('HMGET', KEYS[1], 'g', 'sealed', 'end', 'maxt')
if not st[1] then return {7, 0} end
if tonumber(st[1]) ~= gen then return {8, tonumber(st[1])} end
-- The boundary comes first: an event at or past it belongs to a later generation whether or
-- not this stripe has been sealed since, so a writer holding an old layout is redirected.
if explicit == '0' and st[3] and t >= tonumber(st[3]) then return {6, tonumber(st[3])} end
if st[2] then return {3, 0} end

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
if t < now - window then return {4, now} end
if t > now + window then return {5, now} end

-- selector: the member modulo 2^24, from its decimal digits (exact in doubles).
local function sel(m)
  local r = 0
  for i = 1, #m do r = (r * 10 + string.byte(m, i) - 48) % 16777216 end
  return r
end

local sl = math.floor(t / slice)
local base = KEYS[1] .. ':d:' .. string.format('%.0f', sl) .. ':'
local expireat = string.format('%.0f', (sl + 1) * slice + window + slice)
local s = sel(member)
local depth = 0
local key
while true do
  key = base .. depth .. ':' .. string.format('%.0f', s % (2 ^ depth))
  local r = redis.call('SMISMEMBER', key, member, '0')
  if r[1] == 1 then return {2, 0} end
  if r[2] == 0 or depth >= 24 then break end
  depth = depth + 1
end

-- First write: HINCRBY refuses an overflowing delta without writing anything.
local inc = redis.pcall('HINCRBY', KEYS[1], 'v', delta)
if type(inc) == 'table' and inc.err then return {9, 0} end
if not st[4] or t > tonumber(st[4]) then redis.call('HSET', KEYS[1], 'maxt', string.format('%.0f', t)) end

if depth < 24 and redis.call('SCARD', key) >= setmax then
  -- Split the full leaf: move each record one level deeper by its next selector bit and
  -- leave only the split marker behind.
  local members = redis.call('SMEMBERS', key)
  local bit = 2 ^ depth
  local lo, hi = {}, {}
  for _, m in ipairs(members) do
    if m ~= '0' then
      if math.floor(sel(m) / bit) % 2 == 0 then lo[#lo + 1] = m else hi[#hi + 1] = m end
    end
  end
  local prefix = s % bit
  local klo = base .. (depth + 1) .. ':' .. string.format('%.0f', prefix)
  local khi = base .. (depth + 1) .. ':' .. string.format('%.0f', prefix + bit)
  if #lo > 0 then redis.call('SADD', klo, unpack(lo)); redis.call('PEXPIREAT', klo, expireat) end
  if #hi > 0 then redis.call('SADD', khi, unpack(hi)); redis.call('PEXPIREAT', khi, expireat) end
  redis.call('DEL', key)
  redis.call('SADD', key, '0')
  redis.call('PEXPIREAT', key, expireat)
  if math.floor(s / bit) % 2 == 0 then key = klo else key = khi end
end
redis.call('SADD', key, member)
redis.call('PEXPIREAT', key, expireat)
return {1, 0}
