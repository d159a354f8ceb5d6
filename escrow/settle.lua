-- settle.lua: step 3 of a transfer, at the source: complete T, or abort it.
--
-- KEYS[1]  meta of the source ledger; the nine keys share one hash tag, so one slot (layout:
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
-- ARGV[2]  'complete' | 'abort'
-- ARGV[3]  minimum sequence (the source's witness)
-- Reply: {'ok', state, seq, 'new'|'dup', segment} (state done|aborted, also for a repeat;
--        segment: see step.lua) | {'unknown', 0} |
--        {'done', seq} (abort of a completed T) | {'aborted', seq} (complete of an aborted
--        T) | {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: frozen permits leave the frozen state exactly once. 'complete' drops them (the
-- target has them); 'abort' returns them to free. The caller runs 'complete' only after the
-- target accepted T and 'abort' only after the target refused T; this script refuses to
-- flip a settled transfer the other way.
local t, op, minSeq = ARGV[1], ARGV[2], tonumber(ARGV[3])
if t == nil or t == '' then return invalid('empty transfer ID') end
if op ~= 'complete' and op ~= 'abort' then return invalid('bad operation') end
if not minSeq or minSeq < 0 then return invalid('bad minimum sequence') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(minSeq)
if fenced then return {'fenced', seq} end
local old = redis.call('HGET', out, t)
if not old then return {'unknown', 0} end
local r = cjson.decode(old)
local want = 'done'
if op == 'abort' then want = 'aborted' end
if r.s == want then return {'ok', want, seq, 'dup', segment()} end
if r.s ~= 'frozen' then return {r.s, seq} end
if op == 'abort' then
  for _, p in ipairs(r.p) do redis.call('ZADD', free, p, p) end
end
r.s = want
seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('HSET', out, t, cjson.encode(r))
log_step(seq, op .. ':' .. t)
return {'ok', want, seq, 'new', segment()}
