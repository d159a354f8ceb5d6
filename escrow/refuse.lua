-- refuse.lua: record at the target that T will never be accepted (unless it already was).
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
-- ARGV[3]  minimum sequence (the target's witness)
-- Reply: {'refused', seq, segment} | {'accepted', seq, segment} (T was accepted before: it
--        cannot be refused; segment: see step.lua) |
--        {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- The answer is stored under "len(source):source:T", as in accept.lua.
-- Invariant: the answer about T is final: once refused, accept.lua fails for T; once
-- accepted, the refusal is not recorded. Only after 'refused' may the source abort T.
local t, from, minSeq = ARGV[1], ARGV[2], tonumber(ARGV[3])
if t == nil or t == '' then return invalid('empty transfer ID') end
if from == nil or from == '' then return invalid('empty source') end
if not minSeq or minSeq < 0 then return invalid('bad minimum sequence') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local key = in_key(from, t)
local seq, fenced = fence_check(minSeq)
if fenced then return {'fenced', seq} end
local old = redis.call('HGET', inbox, key)
if old then
  local r = cjson.decode(old)
  if r.s == 'accepted' then return {'accepted', seq, segment()} end
  return {'refused', seq, segment()}
end
seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('HSET', inbox, key, cjson.encode({s = 'refused', from = from}))
log_step(seq, 'refuse:' .. key)
return {'refused', seq, segment()}
