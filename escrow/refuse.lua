-- refuse.lua: record at the target that T will never be accepted (unless it already was).
--
-- KEYS: the eight keys of the target ledger (meta, free, jobs, held, out, in, log,
--       leases), one slot.
-- ARGV: 1 transfer ID T, 2 source owner, 3 minimum sequence (the target's witness).
-- Reply: {'refused', seq, segment} | {'accepted', seq, segment} (T was accepted before: it
--        cannot be refused; segment: see step.lua) |
--        {'fenced', seq} | {'missing', 0} | {'invalid', msg}.
-- The answer is stored under "len(source):source:T", as in accept.lua.
-- Invariant: the answer about T is final: once refused, accept.lua fails for T; once
-- accepted, the refusal is not recorded. Only after 'refused' may the source abort T.
local t, from, minSeq = ARGV[1], ARGV[2], tonumber(ARGV[3])
if t == nil or t == '' then return {'invalid', 'empty transfer ID'} end
if from == nil or from == '' then return {'invalid', 'empty source'} end
if not minSeq or minSeq < 0 then return {'invalid', 'bad minimum sequence'} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', 0} end
local key = string.len(from) .. ':' .. from .. ':' .. t
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq'))
if redis.call('HGET', KEYS[1], 'fenced') == '1' then return {'fenced', seq} end
if seq < minSeq then
  redis.call('HSET', KEYS[1], 'fenced', 1)
  return {'fenced', seq}
end
local old = redis.call('HGET', KEYS[6], key)
if old then
  local r = cjson.decode(old)
  if r.s == 'accepted' then return {'accepted', seq, segment(KEYS[7])} end
  return {'refused', seq, segment(KEYS[7])}
end
seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[6], key, cjson.encode({s = 'refused', from = from}))
log_step(KEYS[7], seq, 'refuse:' .. key)
return {'refused', seq, segment(KEYS[7])}
