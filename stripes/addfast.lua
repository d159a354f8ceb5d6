-- addfast.lua: count one event in one open stripe, exactly once, when the caller knows the
-- state of the dedup table of the event's slice (add.lua's reply). Nothing else: every
-- other case replies 0 and writes nothing, and the caller runs add.lua.
--
-- KEYS[1]  the stripe hash "<prefix>{<tag>}:<name>:<gen>:<i>": the key names the generation
--          (a home stripe, the layout key, is always generation 1), so no field is checked
-- KEYS[2]  the dedup set the record falls in under the caller's view (ARGV[5]): "<KEYS[1]>:
--          e:<slice>:<bucket>", sharing KEYS[1]'s hash tag, hence its slot. When the stored
--          state of the slice is not the view (a split since), the script derives the set
--          from the stored state instead, as add.lua does: not a declared key then.
-- ARGV[1]  dedup record: the event's hashed ID, a positive decimal integer below 2^63
-- ARGV[2]  delta: a non-zero decimal int64
-- ARGV[3]  the event time, Unix milliseconds: stored as maxt if above it (at most once a
--          millisecond, however many events arrive in it)
-- ARGV[4]  the field holding the table state of the event's slice, "d<slice mod R>" (add.lua)
-- ARGV[5]  the caller's view of that state, "<slice>:<L>:<p>", as add.lua stores it
-- ARGV[6]  0, or for one of the sampled additions that check their set's size (the caller
--          samples by two digits of the record, as add.lua describes) the size that makes
--          the table due to split: half the largest dedup set, rounded up
--
-- Reply (an integer): code + 16 * (1 + L + 32 * p) when the stored state "<slice>:<L>:<p>"
-- was not the caller's view (for it to keep as its view), else the code alone:
--   1   applied
--   10  applied, and the record's set is due to split (split.lua)
--   2   duplicate: the record was already present; nothing written but maxt
--   0   not taken: the stripe has a boundary, or no table of the view's slice is stored
--       (none yet, another slice in the ring position, a missing stripe), or the set
--       expired or was lost, or HINCRBY refused the delta (not an integer, or an overflow);
--       nothing written but maxt: run add.lua, which validates the delta and replies with
--       the reason
--
-- Validation: the record and the split check are validated before the first write. The
-- set key, the field and the view are only compared with, or used under, the stored state.
-- The event time is validated before it is written, the only use it has. The delta is
-- validated by HINCRBY: when it refuses, the record added with it is removed in the same
-- atomic step.
--
-- Invariant: the record is added only to the set that add.lua would choose, because the
-- stored state is compared with the view that chose KEYS[2] in the same atomic step (or,
-- when they differ, chooses the set itself), and
-- only into a live set (its marker 0 is present), which proves that the slice was opened
-- by an event that passed add.lua's clock check and has not expired. The value is
-- incremented with the record, or neither is written. maxt is raised to at least the
-- event's time before the record is added, so a boundary set later (close.lua, max(B,
-- maxt + 1)) is above every accepted event. A stripe with a boundary takes no event here
-- (add.lua routes those); a sealed stripe always has one.
--
-- This is the path of almost every event, so when the view holds it does no arithmetic and
-- no conversion of numbers to strings: each costs as much as a Redis command here. The
-- caller computes the slice, the field, the state string and the set. A view one split
-- behind (concurrent writers of a busy stripe, whose in-flight calls all saw the state
-- before a split) costs a parse here rather than a second call.

if #ARGV ~= 6 then return redis.error_reply('ERR stripes: addfast takes 6 arguments') end
local stripe, set = KEYS[1], KEYS[2]
local member, delta, maxt, field, view, check = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if #member > 19 or not string.find(member, '^[1-9]%d*$') or (#member == 19 and member > '9223372036854775807') then
  return redis.error_reply('ERR stripes: bad dedup record')
end
if check ~= '0' and (#check > 9 or not string.find(check, '^[1-9]%d*$')) then return redis.error_reply('ERR stripes: bad split check') end

local st = redis.call('HMGET', stripe, 'end', 'maxt', field)
if st[1] or not st[3] then return 0 end
local taught = 0
if st[3] ~= view then
  -- The view is stale (the table split since) or names another slice. If the stored state
  -- is of the view's slice, the record goes where add.lua would put it under that state.
  local s0, l0, p0 = string.match(st[3], '^(%d+):(%d+):(%d+)$')
  if not s0 or string.sub(view, 1, #s0 + 1) ~= s0 .. ':' then return 0 end
  local L, p = tonumber(l0), tonumber(p0)
  local s = tonumber(string.sub(member, -7))
  local b = s % 2 ^ L
  if b < p then b = s % 2 ^ (L + 1) end
  set = stripe .. ':e:' .. s0 .. ':' .. string.format('%d', b) -- b below 2^23: exact
  taught = 16 * (1 + L + 32 * p)
end
local m = st[2]
if not m or #maxt > #m or (#maxt == #m and maxt > m) then
  if #maxt > 16 or not string.find(maxt, '^[1-9]%d*$') then return redis.error_reply('ERR stripes: bad event time') end
  redis.call('HSET', stripe, 'maxt', maxt)
end
local n = redis.call('SADD', set, member, '0')
if n == 0 then return 2 + taught end
if n == 2 then
  redis.call('SREM', set, member, '0') -- the set expired or was lost: add.lua checks the clock
  return 0
end
if type(redis.pcall('HINCRBY', stripe, 'v', delta)) == 'table' then
  redis.call('SREM', set, member)
  return 0
end
if check ~= '0' and redis.call('SCARD', set) >= tonumber(check) then return 10 + taught end
return 1 + taught
