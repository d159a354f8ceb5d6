-- accept.lua: step 2 of a transfer, at the target: accept T exactly once.
--
-- KEYS[1]  meta of the target ledger; the nine keys share one hash tag, so one slot (layout:
--          step.lua)
-- KEYS[2]  free
-- KEYS[3]  jobs
-- KEYS[4]  held
-- KEYS[5]  out
-- KEYS[6]  in
-- KEYS[7]  log
-- KEYS[8]  leases
-- KEYS[9]  released
-- ARGV[1]  transfer ID T
-- ARGV[2]  source owner
-- ARGV[3]  source sequence at the freeze
-- ARGV[4]  minimum sequence (the target's witness)
-- ARGV[5..] the permit numbers
-- Reply: {'ok', 'new'|'dup', seq, segment} | {'refused', seq, segment} (segment: see step.lua) | {'conflict', permit} | {'fenced', seq} |
--        {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- The answer about T is stored under the field "len(source):source:T": transfer IDs are
-- unique per source only (the source's out hash), so T from another source is another
-- transfer.
-- Invariant: the permits of T are added once; a duplicate delivery returns 'dup' and adds
-- nothing; after a recorded refusal of T an accept fails, so an aborted transfer can never
-- also land. The caller has the witness confirm the segment on 'refused' too, before the
-- source aborts on that answer. The target's sequence moves above the source's, so fencing
-- tokens granted for a permit keep rising as the permit moves between owners.
local t, from, srcSeq, minSeq = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if t == nil or t == '' then return invalid('empty transfer ID') end
if from == nil or from == '' then return invalid('empty source') end
if not srcSeq or srcSeq < 0 then return invalid('bad source sequence') end
if not minSeq or minSeq < 0 then return invalid('bad minimum sequence') end
if #ARGV < 5 then return invalid('no permits') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local cap = tonumber(redis.call('HGET', meta, 'cap'))
local nums = {}
for i = 5, #ARGV do
  local p = tonumber(ARGV[i])
  if not p or p < 1 or p > cap or p ~= math.floor(p) then return invalid('permit out of range') end
  nums[#nums + 1] = p
end
local key = in_key(from, t)
local seq, fenced = fence_check(minSeq)
if fenced then return {'fenced', seq} end
local old = redis.call('HGET', inbox, key)
if old then
  local r = cjson.decode(old)
  if r.s == 'refused' then return {'refused', seq, segment()} end
  return {'ok', 'dup', seq, segment()}
end
for _, p in ipairs(nums) do
  if redis.call('ZSCORE', free, p) or redis.call('HEXISTS', held, p) == 1 then
    return {'conflict', p}
  end
end
for _, p in ipairs(nums) do redis.call('ZADD', free, p, p) end
if srcSeq > seq then seq = srcSeq end
seq = seq + 1
redis.call('HSET', meta, 'seq', seq)
redis.call('HSET', inbox, key, cjson.encode({s = 'accepted', from = from, p = nums}))
log_step(seq, 'accept:' .. key)
return {'ok', 'new', seq, segment()}
