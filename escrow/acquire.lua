-- acquire.lua: grant the lowest free permit to a job, once per job ID.
--
-- KEYS: the seven keys of one ledger (meta, free, jobs, held, out, in, log), same hash tag,
--       one slot.
-- ARGV: 1 job ID (non-empty), 2 minimum sequence (the witness; 0 for a Central limiter).
-- Reply: {'ok', permit, token, 'new'|'dup', segment} (segment: see step.lua) | {'exhausted', seq} | {'fenced', seq} |
--        {'missing', 0} | {'invalid', msg}.
-- Invariant: a permit moves from free to held by exactly one job; a retried acquire of the
-- same job returns the same permit and token; the token is the ledger sequence after the
-- grant, so tokens only grow. A ledger behind its witness is marked fenced and grants nothing.
local job, minSeq = ARGV[1], tonumber(ARGV[2])
if job == nil or job == '' then return {'invalid', 'empty job ID'} end
if not minSeq or minSeq < 0 then return {'invalid', 'bad minimum sequence'} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', 0} end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq'))
if redis.call('HGET', KEYS[1], 'fenced') == '1' then return {'fenced', seq} end
if seq < minSeq then
  redis.call('HSET', KEYS[1], 'fenced', 1)
  return {'fenced', seq}
end
local cur = redis.call('HGET', KEYS[3], job)
if cur then
  local sep = string.find(cur, ':', 1, true)
  return {'ok', tonumber(string.sub(cur, 1, sep - 1)), tonumber(string.sub(cur, sep + 1)), 'dup', segment(KEYS[7])}
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0)
if #first == 0 then return {'exhausted', seq} end
local p = first[1]
redis.call('ZREM', KEYS[2], p)
seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[3], job, p .. ':' .. seq)
redis.call('HSET', KEYS[4], p, job)
log_step(KEYS[7], seq, 'acquire:' .. p .. ':' .. job)
return {'ok', tonumber(p), seq, 'new', segment(KEYS[7])}
