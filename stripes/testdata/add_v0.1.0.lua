-- add.lua: count one event in one stripe, exactly once.
--
-- KEYS[1]  the stripe hash "<prefix>{<tag>}:<name>:<gen>:<i>" (fields g, n, i, v, maxt,
--          end, sealed, and d<r>: the dedup state of the slice stored in ring position r).
--          The dedup sets of the stripe are "<KEYS[1]>:e:<slice>:<bucket>"; they are derived
--          here rather than declared because their names depend on the stored state, and
--          they share KEYS[1]'s hash tag, hence its slot.
-- ARGV[1]  generation the caller routed to (must equal field g)
-- ARGV[2]  dedup record: the event's hashed ID, a positive decimal integer below 2^63
-- ARGV[3]  delta: a non-zero decimal int64
-- ARGV[4]  event time, Unix milliseconds
-- ARGV[5]  dedup window, milliseconds
-- ARGV[6]  slice width, milliseconds
-- ARGV[7]  largest dedup set: a set is split once it holds half as many records
-- ARGV[8]  1 if the caller named the generation explicitly (skip the boundary check)
--
-- Reply: {code, value}
--   {1, 0}    applied
--   {2, 0}    duplicate: the record was already present; nothing written
--   {3, 0}    the stripe is sealed (generation folded) and the event is before its boundary
--             (or names the generation): too old; nothing written
--   {4, now}  the event's dedup records may have expired: its time is more than one window
--             behind the server clock; nothing written
--   {5, now}  event time is more than one window ahead of the server clock; nothing written
--   {6, end}  event time is at or past this stripe's boundary (checked before sealed, the
--             window and the clock): route to the next generation
--   {7, 0}    the stripe key does not exist
--   {8, g}    the stripe belongs to generation g, not ARGV[1]
--   {9, 0}    the delta would overflow the stripe's int64 value: no record added, the value
--             unchanged (the slice's first bucket may have been created, empty)
--
-- Dedup sets: the records of one slice form a linear hash table. Its state "<slice>:<L>:<p>"
-- (level L, split pointer p) lives in field d<slice mod R> of the stripe hash, where R is
-- larger than the number of slices an accepted event can fall in (2 windows plus 3 slices),
-- so a ring position is reused only after its slice can no longer take events. A record's
-- selector s is its last 7 decimal digits; its bucket is s mod 2^L, or s mod 2^(L+1) if that
-- is below p. Every bucket is created holding the marker 0 and the slice's expiry, so later
-- additions need no PEXPIREAT, and an addition that finds the marker missing knows the
-- bucket expired (or was lost). When a sampled addition (the record's 9th and 8th digits from
-- the right, as a number, below 6400/ARGV[7]) finds its bucket at half the largest set
-- (ARGV[7]), bucket p is split: its records with bit L of s set move to bucket p + 2^L (both
-- sets are rebuilt, hence intsets), and p advances. Lookups with the new state find every record.
--
-- Fast path: a stripe of generation ARGV[1] with no boundary and no seal, whose ring already
-- holds the event's slice, takes one HMGET, one SADD of the record with the marker, and one
-- HSET of the value and maxt (HINCRBY when maxt stays or the value nears 2^52). It reads no
-- clock: the slice's bucket holding its marker proves the slice has not expired, and the
-- slice was opened by an event that passed the clock check below. Everything else (a new
-- slice, a closed, sealed or missing stripe, an expired or lost bucket) takes the full path,
-- which checks the event time against the server clock (TIME).
--
-- Invariant: the record is added and the value incremented together, or neither (an
-- overflowing HINCRBY removes the record it just added, inside this one atomic script); a
-- record lives until its slice ends plus one window plus one slice; an addition finds its
-- bucket alive or takes the full path, whose time check refuses events whose slice may have
-- expired, and a ring position holding a later slice refuses the event too. Hence a retry
-- inside the window never counts twice. maxt is never below an accepted event's time.

if #ARGV ~= 8 then return redis.error_reply('ERR stripes: add takes 8 arguments') end
local stripe = KEYS[1]
local gen, member, delta, ts, explicit = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[8]
local t, window, slice, setmax = tonumber(ts), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if not string.match(member, '^[1-9]%d*$') or #member > 19 or (#member == 19 and member > '9223372036854775807') then
  return redis.error_reply('ERR stripes: bad dedup record')
end
if not string.match(delta, '^%-?[1-9]%d*$') or #delta > 20 then return redis.error_reply('ERR stripes: bad delta') end
if #delta >= 19 then
  local digits = string.match(delta, '(%d+)$')
  if #digits > 19 or #digits == 19 and digits > (string.sub(delta, 1, 1) == '-' and '9223372036854775808' or '9223372036854775807') then
    return redis.error_reply('ERR stripes: bad delta')
  end
end
if not string.match(ts, '^%d+$') or t >= 2 ^ 53 then return redis.error_reply('ERR stripes: bad event time') end
if not window or window < 1 or window % 1 ~= 0 or window >= 2 ^ 53 then return redis.error_reply('ERR stripes: bad window') end
if not slice or slice < 1 or slice % 1 ~= 0 or slice > window then return redis.error_reply('ERR stripes: bad slice') end
if not setmax or setmax < 2 or setmax % 1 ~= 0 then return redis.error_reply('ERR stripes: bad set size') end
if explicit ~= '0' and explicit ~= '1' then return redis.error_reply('ERR stripes: bad mode') end

local sl = math.floor(t / slice)
local slid = string.format('%d', sl)
local sf = 'd' .. sl % (2 * math.ceil(window / slice) + 3) -- below 2052: printed exactly
local st = redis.call('HMGET', stripe, 'g', 'sealed', 'end', 'maxt', 'v', sf)
local L, p, key
local fast = false
if st[1] == gen and not st[2] and not st[3] and st[6] then
  local s0, l0, p0 = string.match(st[6], '^(%d+):(%d+):(%d+)$')
  if s0 == slid then
    L, p = tonumber(l0), tonumber(p0)
    local s = tonumber(string.sub(member, -7))
    local b = s % 2 ^ L
    if b < p then b = s % 2 ^ (L + 1) end
    key = stripe .. ':e:' .. slid .. ':' .. b -- b below 2^23: printed exactly
    local n = redis.call('SADD', key, member, '0')
    if n == 0 then return {2, 0} end
    if n == 2 then
      redis.call('SREM', key, member, '0') -- the bucket expired or was lost: undo, full path
    else
      fast = true
    end
  end
end

if not fast then
  if not string.match(gen, '^[1-9]%d*$') or #gen > 15 then return redis.error_reply('ERR stripes: bad generation') end
  if not st[1] then return {7, 0} end
  if st[1] ~= gen then return {8, tonumber(st[1])} end
  -- The boundary comes first: an event at or past it belongs to a later generation whether
  -- or not this stripe has been sealed since, so a writer holding an old layout is
  -- redirected.
  if explicit == '0' and st[3] and t >= tonumber(st[3]) then return {6, tonumber(st[3])} end
  if st[2] then return {3, 0} end

  local tm = redis.call('TIME')
  local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
  if t < now - window then return {4, now} end
  if t > now + window then return {5, now} end

  local base = stripe .. ':e:' .. slid .. ':'
  local expireat = string.format('%d', (sl + 1) * slice + window + slice) -- below 2^53: exact
  L, p = 0, 0
  local s0, l0, p0
  if st[6] then s0, l0, p0 = string.match(st[6], '^(%d+):(%d+):(%d+)$') end
  if s0 == slid then
    L, p = tonumber(l0), tonumber(p0)
  elseif s0 and tonumber(s0) > sl then
    return {4, now} -- the ring position holds a later slice: this one can take no events
  else
    -- First record of this slice in this stripe: bucket 0 exists from now on.
    redis.call('SADD', base .. '0', '0')
    redis.call('PEXPIREAT', base .. '0', expireat)
    redis.call('HSET', stripe, sf, slid .. ':0:0')
  end
  local s = tonumber(string.sub(member, -7))
  local b = s % 2 ^ L
  if b < p then b = s % 2 ^ (L + 1) end
  key = base .. string.format('%d', b)
  local n = redis.call('SADD', key, member, '0')
  if n == 0 then return {2, 0} end
  if n == 2 then redis.call('PEXPIREAT', key, expireat) end -- a lost bucket, recreated
end

local v, d = tonumber(st[5]), tonumber(delta)
local later = not st[4] or t > tonumber(st[4])
if later and v and v < 2 ^ 52 and v > -2 ^ 52 and d < 2 ^ 52 and d > -2 ^ 52 then
  redis.call('HSET', stripe, 'v', string.format('%d', v + d), 'maxt', ts)
else
  local inc = redis.pcall('HINCRBY', stripe, 'v', delta)
  if type(inc) == 'table' and inc.err then
    redis.call('SREM', key, member)
    return {9, 0}
  end
  if later then redis.call('HSET', stripe, 'maxt', ts) end
end

-- The split check samples one addition in about setmax/64, by two digits of the record that
-- do not choose its bucket: buckets grow by about that much between checks, far from
-- setmax.
local c9, c8 = string.byte(member, -9, -8)
if L < 22 and ((c9 or 48) * 10 + (c8 or 48) - 528) * setmax < 6400
    and redis.call('SCARD', key) * 2 >= setmax then
  local base = stripe .. ':e:' .. slid .. ':'
  local expireat = string.format('%d', (sl + 1) * slice + window + slice)
  local bit = 2 ^ L
  local src, dst = base .. string.format('%d', p), base .. string.format('%d', p + bit)
  local stay, move = {'0'}, {'0'}
  for _, m in ipairs(redis.call('SMEMBERS', src)) do
    if m ~= '0' then
      if math.floor(tonumber(string.sub(m, -7)) / bit) % 2 == 0 then stay[#stay + 1] = m else move[#move + 1] = m end
    end
  end
  redis.call('DEL', src)
  redis.call('SADD', src, unpack(stay))
  redis.call('SADD', dst, unpack(move))
  redis.call('PEXPIREAT', src, expireat)
  redis.call('PEXPIREAT', dst, expireat)
  p = p + 1
  if p == bit then L, p = L + 1, 0 end
  redis.call('HSET', stripe, sf, slid .. ':' .. L .. ':' .. p)
end
return {1, 0}
