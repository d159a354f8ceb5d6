-- set.lua: versioned set-if-newer of a logical key's primary record, optionally as the fill
-- of a GetOrLoad lease. Built after registry.lua, whose merge() it uses.
--
-- KEYS[1]  the primary record "<prefix>{<tag>}k:<key>". While it holds no record it may hold
--          a lease marker "l2,<token>,<waiters>" or an absent/error marker (see acquire.lua):
--          a write replaces those and wakes the marker's waiters.
-- KEYS[2]  the wake list "<prefix>{<tag>}w:<key>".
-- KEYS[3]  only for fills: the side lease "<prefix>{<tag>}l:<key>".
--          All share <tag>, so they live in one slot.
-- ARGV[1]  version: decimal uint64, no leading zeros.
-- ARGV[2]  kind: "v" (value) or "x" (tombstone).
-- ARGV[3]  data: the host's bytes (empty for a tombstone).
-- ARGV[4]  the value's life in ms, > 0.
-- ARGV[5]  registry slots to add, "<slot>.<slot>..." (may be empty): the copies the writer
--          keeps current.
-- ARGV[6]  lease token (fills only; its <id> is compared, see same()): the fill applies only while this token holds the lease
--          (in the primary or in the side lease), or as the retry of a fill that applied.
-- ARGV[7]  how long the wake list lasts, ms (fills only).
-- ARGV[8]  NegativeTTL in ms, >= 0 (fills only; 0: none): a fill refused by a live tombstone
--          of a newer version (the source lags behind a delete) leaves the absent marker
--          "n2,<token>" in the side lease for that long, as a load that found nothing does.
-- ARGV[9]  "1" when a lease the caller holds in the primary was given the value's life
--          (ARGV[4]) when it was taken, "0" otherwise (fills only; optional): then a fill
--          that finds that lease swaps it for the record in one write keeping the key's TTL.
--
-- Stored format: "c2,<version>,<kind>,<expiry ms>,<registry>,<data>", registry entries
-- "<slot>:<expiry ms>" joined by "."; expiry 0 (only with an empty registry) means the
-- key's own TTL is the value's end.
--
-- Reply: {status, raw}: raw is the record stored after the call ("" when none).
--   "applied"     written (a new version, or the same content again after it expired).
--   "same"        this version with this content is stored and live (a retry): only the
--                 registry may have grown.
--   "stale"       refused: a newer version is stored (live or as a ghost).
--   "conflict"    refused: this version is stored with other content or the other kind.
--   "superseded"  refused: the lease token is not the current one (expired or taken over).
--
-- Invariant: a record never moves to an older version while its key lives, so retries and
-- late writes are harmless; a registry entry is never shortened, and the key lives until
-- its last entry ends (after the value expires it stays as a version floor), so every copy
-- a writer was ever told about stays reachable by later writers for as long as it may live;
-- a fill whose lease is gone changes nothing. Every argument is checked before any write.

local rec, wake, side = KEYS[1], KEYS[2], KEYS[3]
local version, kind, data, ttl, add = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if not version or not string.match(version, '^%d+$') or #version > 20 or (#version > 1 and string.sub(version, 1, 1) == '0') then
  return redis.error_reply('ERR replicas: bad version ' .. tostring(version))
end
if kind ~= 'v' and kind ~= 'x' then
  return redis.error_reply('ERR replicas: bad kind ' .. tostring(kind))
end
if not ttl or not string.match(ttl, '^%d+$') or tonumber(ttl) <= 0 then
  return redis.error_reply('ERR replicas: bad ttl ' .. tostring(ttl))
end
if not add or not string.match(add, '^[%d.]*$') then
  return redis.error_reply('ERR replicas: bad registry ' .. tostring(add))
end
local token, wakeMs, negMs, keep = nil, '1000', 0, '0'
if #KEYS == 3 then
  token, wakeMs, negMs, keep = ARGV[6], ARGV[7], ARGV[8] or '0', ARGV[9] or '0'
  if not token or token == '' or string.find(token, ',', 1, true) or not wakeMs or not string.match(wakeMs, '^%d+$') or tonumber(wakeMs) <= 0 or not string.match(negMs, '^%d+$') or (keep ~= '0' and keep ~= '1') then
    return redis.error_reply('ERR replicas: bad lease arguments')
  end
  negMs = tonumber(negMs)
elseif #KEYS ~= 2 then
  return redis.error_reply('ERR replicas: set takes 2 or 3 keys')
end

-- same says two lease tokens are one holder's: "<id>.<deadline>" names its holder by <id>
-- (renew.lua moves the deadline on while the holder works).
local function same(a, b)
  return a ~= nil and b ~= nil and string.match(a, '^[^.]*') == string.match(b, '^[^.]*')
end

-- The usual miss of a key that is not replicated: the primary holds the caller's lease, taken
-- with the value's life. One write swaps the lease for the record and keeps the key's TTL;
-- whatever else it finds is put back as it was (same value, same TTL: KEEPTTL kept it) and
-- the general path below decides.
if keep == '1' and add == '' and kind == 'v' then
  local out = 'c2,' .. version .. ',v,0,,' .. data
  local old = redis.call('SET', rec, out, 'XX', 'GET', 'KEEPTTL')
  if old then
    local tok, n = string.match(old, '^l2,([^,]*),(%d+)$')
    if same(tok, token) then
      n = tonumber(n)
      if n > 0 then
        for _ = 1, math.min(n, 1000) do redis.call('RPUSH', wake, '1') end
        redis.call('PEXPIRE', wake, wakeMs)
      end
      return {'applied', out}
    end
    redis.call('SET', rec, old, 'KEEPTTL')
  end
end

local raw = redis.call('GET', rec)
local waiters, ownSide = 0, false
local ownPrimary = false
if raw and string.sub(raw, 1, 3) ~= 'c2,' then
  local tok, n = string.match(raw, '^l2,([^,]*),(%d+)$')
  if tok then
    waiters = tonumber(n)
    ownPrimary = same(tok, token)
  end
  raw = nil
end
if token and not ownPrimary then
  local held = redis.call('GET', side)
  local tok, n = nil, nil
  if held then tok, n = string.match(held, '^l2,([^,]*),(%d+)$') end
  if same(tok, token) then
    ownSide = true
    waiters = waiters + tonumber(n)
  elseif raw and string.match(raw, '^c2,' .. version .. ',' .. kind .. ',%d+,[%d.:]*,') and
      string.sub(raw, #string.match(raw, '^c2,%d+,[vx],%d+,[%d.:]*,') + 1) == data then
    return {'same', raw} -- the retry of a fill that applied
  else
    return {'superseded', raw or ''}
  end
end

-- clock reads the server's time once, only when needed: a record of a key that was never
-- replicated (no registry) stores expiry 0 and lives by its key's own TTL.
local now = nil
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

-- release ends the side lease of a fill (leaving the absent marker when absent) and wakes
-- every waiter.
local function release(absent)
  if ownSide then
    if absent then
      redis.call('SET', side, 'n2,' .. token, 'PX', negMs)
    else
      redis.call('DEL', side)
    end
  end
  if waiters > 0 then
    for _ = 1, math.min(waiters, 1000) do redis.call('RPUSH', wake, '1') end
    redis.call('PEXPIRE', wake, wakeMs)
  end
end

local sv, sk, sx, sreg, pos = nil, nil, nil, '', nil
if raw then
  sv, sk, sx, sreg, pos = string.match(raw, '^c2,(%d+),([vx]),(%d+),([%d.:]*),()')
end
local status = 'applied'
if sv then
  sx = tonumber(sx)
  if newer(sv, version) then
    status = 'stale'
  elseif sv == version then
    if sk ~= kind or string.sub(raw, pos) ~= data then
      status = 'conflict'
    elseif sx == 0 or sx > clock() then
      status = 'same'
    end
  end
end
if status == 'stale' or status == 'conflict' then
  release(status == 'stale' and sk == 'x' and negMs > 0 and (sx == 0 or sx > clock()))
  return {status, raw}
end

if add == '' and (sreg or '') == '' and (status ~= 'same' or sx == 0) then
  -- Not replicated: expiry 0, the key's own TTL is the value's.
  if status == 'applied' then
    local out = 'c2,' .. version .. ',' .. kind .. ',0,,' .. data
    redis.call('SET', rec, out, 'PX', ttl)
    release()
    return {status, out}
  end
  release()
  return {status, raw}
end

local expiry = clock() + tonumber(ttl)
if status == 'same' then
  expiry = sx
  if sx == 0 then expiry = clock() + math.max(redis.call('PTTL', rec), 1) end
end

-- The registry: entries to add end no sooner than the value; live entries keep their end.
local reg, last = merge(sreg or '', add, expiry, clock())
local out = 'c2,' .. version .. ',' .. kind .. ',' .. string.format('%.0f', expiry) .. ',' .. reg .. ',' .. data
if out ~= raw then
  redis.call('SET', rec, out, 'PXAT', string.format('%.0f', last))
end
release()
return {status, out}
