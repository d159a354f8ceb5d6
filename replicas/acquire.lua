-- acquire.lua: read a logical key's primary record or take its fill lease, in one step: the
-- path for a hot key (which registers the copies it will fill) and for whatever the plain
-- "SET <primary> l2,<token>,0 NX GET PX <ms>" of GetOrLoad cannot settle alone (another
-- holder's lease, an expired record or a tombstone). Built after registry.lua, whose merge() it
-- uses.
--
-- KEYS[1]  the primary record "<prefix>{<tag>}k:<key>".
-- KEYS[2]  the side lease "<prefix>{<tag>}l:<key>", used while the primary holds a record
--          (a tombstone or an expired value) that the lease must not replace.
--          Both share <tag>, so they live in one slot.
-- ARGV[1]  the caller's lease token (non-empty, no ',').
-- ARGV[2]  lease lifetime in ms, > 0.
-- ARGV[3]  copies to register when the record holds a live value, "<slot>.<slot>..." (may
--          be empty), as register.lua does.
-- ARGV[4]  the life in ms (> 0) of a lease taken in the primary: the caller's value TTL, so
--          that the fill keeps the key's TTL (KEEPTTL) and needs no second write. Optional;
--          default ARGV[2].
--
-- Lease markers (in the primary when it holds no record, else in the side lease):
-- "l2,<token>,<waiters>" held; "n2,<token>" the source does not have the key; "e2,<token>,
-- <message>" the last load failed. Absent and error markers live NegativeTTL / ErrorTTL.
-- A token "<id>.<deadline>" holds the lease until <deadline> (Unix ms) while its marker
-- lives; a token without a deadline, while its marker lives. A lease this script takes
-- (first or over an expired holder) gets its deadline here, the server's TIME + ARGV[2]:
-- a waiter that takes over after a long wait holds a whole LeaseTTL of its own, so the
-- next waiter does not take it over in turn. renew.lua moves the deadline on while the
-- holder works. A lease is the holder's by <id>: the deadline in ARGV[1] is ignored.
--
-- Reply:
--   {"hit", raw}        the primary holds a live value (raw: the record after registration).
--   {"won", token}      the caller holds the lease (taken now, or already its own), with
--                       token (the caller's <id> and the lease's deadline).
--   {"wait", pttl}      another caller holds it for pttl ms more; the caller is counted in
--                       the marker, and the filler pushes one element per waiter onto
--                       "<prefix>{<tag>}w:<key>".
--   {"absent"}          the source did not have the key (within NegativeTTL).
--   {"error", message}  the last load failed with message (within ErrorTTL).
--
-- Invariant: at most one token holds the lease at a time, and only until it expires; a
-- lease taken here lasts ARGV[2] ms by the server's clock from the moment it is taken.

local rec, side = KEYS[1], KEYS[2]
local token, ms, add, life = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or ARGV[2]
if not token or token == '' or string.find(token, ',', 1, true) then
  return redis.error_reply('ERR replicas: bad lease token')
end
if not ms or not string.match(ms, '^%d+$') or tonumber(ms) <= 0 then
  return redis.error_reply('ERR replicas: bad lease ttl ' .. tostring(ms))
end
if not add or not string.match(add, '^[%d.]*$') then
  return redis.error_reply('ERR replicas: bad registry ' .. tostring(add))
end
if not string.match(life, '^%d+$') or tonumber(life) <= 0 then
  return redis.error_reply('ERR replicas: bad lease life ' .. tostring(life))
end

local now = nil
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

local id = string.match(token, '^[^.]*')

-- take takes the lease in key k, its marker living px ms, with a deadline ARGV[2] ms from now.
local function take(k, px)
  local t = id .. '.' .. string.format('%.0f', clock() + tonumber(ms))
  redis.call('SET', k, 'l2,' .. t .. ',0', 'PX', px)
  return {'won', t}
end

-- lease takes or inspects the lease held in key k, taking it for px ms.
local function lease(k, held, px)
  if not held then
    return take(k, px)
  end
  local mark = string.sub(held, 1, 3)
  if mark == 'n2,' then
    return {'absent'}
  elseif mark == 'e2,' then
    return {'error', string.match(held, '^e2,[^,]*,(.*)$') or ''}
  elseif mark == 'l2,' then
    local tok, n = string.match(held, '^l2,([^,]*),(%d+)$')
    if tok and string.match(tok, '^[^.]*') == id then return {'won', tok} end
    local deadline = tok and tonumber(string.match(tok, '%.(%d+)$'))
    if deadline and deadline <= clock() then
      -- The holder's time is up: take the lease over, for a whole lease from now. Its
      -- waiters look again when their wait, bounded by the deadline, ends.
      return take(k, px)
    end
    redis.call('SET', k, 'l2,' .. tostring(tok) .. ',' .. tostring((tonumber(n) or 0) + 1), 'KEEPTTL')
    local left = redis.call('PTTL', k)
    if deadline then left = math.min(left, deadline - clock()) end
    return {'wait', left}
  end
  -- Not a marker of this package: take the lease over it.
  return take(k, px)
end

local raw = redis.call('GET', rec)
if not raw or string.sub(raw, 1, 3) ~= 'c2,' then
  return lease(rec, raw, life)
end
local sv, sk, sx, sreg, pos = string.match(raw, '^c2,(%d+),([vx]),(%d+),([%d.:]*),()')
if not sv or sk ~= 'v' or (sx ~= '0' and tonumber(sx) <= clock()) then
  return lease(side, redis.call('GET', side), ms)
end
if add ~= '' then
  if sx == '0' then
    -- Never replicated: the key's TTL is the value's; registering needs it as a time.
    sx = string.format('%.0f', clock() + math.max(redis.call('PTTL', rec), 1))
  end
  local reg = merge(sreg, add, tonumber(sx), clock())
  if reg ~= sreg or string.match(raw, '^c2,%d+,[vx],0,') then
    raw = 'c2,' .. sv .. ',' .. sk .. ',' .. sx .. ',' .. reg .. ',' .. string.sub(raw, pos)
    redis.call('SET', rec, raw, 'KEEPTTL')
  end
end
return {'hit', raw}
