-- split.lua: split the next bucket of one slice's dedup table, once per state.
--
-- KEYS[1]  the stripe hash; the table's sets "<KEYS[1]>:e:<slice>:<bucket>" share its hash
--          tag, hence its slot (derived here: which two sets depends on the stored state)
-- ARGV[1]  the slice
-- ARGV[2]  the field holding the slice's table state, "d<slice mod R>" (add.lua)
-- ARGV[3]  the state the caller saw due to split, "<L>:<p>"
-- ARGV[4]  the sets' expiry, Unix milliseconds: the end of the slice plus one window plus
--          one slice (add.lua)
--
-- Reply: {L, p}, the table's state after the call. The split happens only if the stored
-- state is still ARGV[3]: two callers that saw the same set due split it once.
--
-- Invariant (linear hashing): bucket p's records with bit L of their selector set move to
-- bucket p + 2^L, both sets are rebuilt (hence intsets) with the marker 0 and the expiry, and
-- the state advances in the same atomic step, so a lookup with the new state (add.lua,
-- addfast.lua) finds every record, and one with the old state finds none of the moved
-- records in a set it may add to: addfast.lua compares states before it adds.

local stripe = KEYS[1]
local slid, field, view, expireat = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if #ARGV ~= 4 then return redis.error_reply('ERR stripes: split takes 4 arguments') end
if not string.match(slid, '^%d+$') or #slid > 16 then return redis.error_reply('ERR stripes: bad slice') end
if not string.match(field, '^d%d+$') then return redis.error_reply('ERR stripes: bad ring field') end
local l0, p0 = string.match(view, '^(%d+):(%d+)$')
if not l0 then return redis.error_reply('ERR stripes: bad table state') end
if not string.match(expireat, '^%d+$') or #expireat > 16 then return redis.error_reply('ERR stripes: bad expiry') end

local st = redis.call('HGET', stripe, field)
local s0, l1, p1 = string.match(st or '', '^(%d+):(%d+):(%d+)$')
if s0 ~= slid then return {-1, -1} end -- the slice's table is gone (expired, or the ring moved on)
if l1 ~= l0 or p1 ~= p0 then return {tonumber(l1), tonumber(p1)} end
local L, p = tonumber(l0), tonumber(p0)
if L >= 22 then return {L, p} end
local base = stripe .. ':e:' .. slid .. ':'
local bit = 2 ^ L
local src, dst = base .. p0, base .. string.format('%d', p + bit)
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
redis.call('HSET', stripe, field, slid .. ':' .. L .. ':' .. p)
return {L, p}
