-- settle.lua: step 3 of a transfer, at the source: complete T, or abort it.
--
-- KEYS: the eight keys of the source ledger (meta, free, jobs, held, out, in, log,
--       leases), one slot.
-- ARGV: 1 transfer ID T, 2 'complete' | 'abort', 3 minimum sequence (the source's witness).
-- Reply: {'ok', state, seq, 'new'|'dup', segment} (state done|aborted, also for a repeat;
--        segment: see step.lua) | {'unknown', 0} |
--        {'done', seq} (abort of a completed T) | {'aborted', seq} (complete of an aborted
--        T) | {'fenced', seq} | {'missing', 0} | {'invalid', msg}.
-- Invariant: frozen permits leave the frozen state exactly once. 'complete' drops them (the
-- target has them); 'abort' returns them to free. The caller runs 'complete' only after the
-- target accepted T and 'abort' only after the target refused T; this script refuses to
-- flip a settled transfer the other way.
local t, op, minSeq = ARGV[1], ARGV[2], tonumber(ARGV[3])
if t == nil or t == '' then return {'invalid', 'empty transfer ID'} end
if op ~= 'complete' and op ~= 'abort' then return {'invalid', 'bad operation'} end
if not minSeq or minSeq < 0 then return {'invalid', 'bad minimum sequence'} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', 0} end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq'))
if redis.call('HGET', KEYS[1], 'fenced') == '1' then return {'fenced', seq} end
if seq < minSeq then
  redis.call('HSET', KEYS[1], 'fenced', 1)
  return {'fenced', seq}
end
local old = redis.call('HGET', KEYS[5], t)
if not old then return {'unknown', 0} end
local r = cjson.decode(old)
local want = 'done'
if op == 'abort' then want = 'aborted' end
if r.s == want then return {'ok', want, seq, 'dup', segment(KEYS[7])} end
if r.s ~= 'frozen' then return {r.s, seq} end
if op == 'abort' then
  for _, p in ipairs(r.p) do redis.call('ZADD', KEYS[2], p, p) end
end
r.s = want
seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[5], t, cjson.encode(r))
log_step(KEYS[7], seq, op .. ':' .. t)
return {'ok', want, seq, 'new', segment(KEYS[7])}
