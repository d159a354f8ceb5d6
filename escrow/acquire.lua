-- acquire.lua: grant the lowest free permit to a job, once per job ID.
--
-- KEYS[1]  meta of one ledger; the nine keys share one hash tag, so one slot (layout:
--          step.lua)
-- KEYS[2]  free
-- KEYS[3]  jobs
-- KEYS[4]  held
-- KEYS[5]  out
-- KEYS[6]  in
-- KEYS[7]  log
-- KEYS[8]  leases
-- KEYS[9]  released
-- ARGV[1]  job ID (non-empty)
-- ARGV[2]  minimum sequence (the witness; 0 for a Central limiter)
-- ARGV[3]  lease in milliseconds (0: the grant has no lease)
-- ARGV[4]  clock-skew margin in milliseconds
-- ARGV[5]  '1' to log the step and return the segment (a Pool, whose witness confirms it),
--          '0' not to (a Central, which has no witness chain)
-- Reply: {'ok', permit, token, 'new'|'dup', segment, lease left in microseconds (the
--        lease's expiry less this server's now; 0 without a lease), 1 if the grant has a lease
--        else 0, permits taken back} (segment: see step.lua) | {'exhausted', seq, permits
--        taken back} | {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a permit moves from free to held by exactly one job; a retried acquire of the
-- same job returns the same permit and token; a new grant forgets an earlier release of the
-- job ID (released), so that the new grant's release is not taken for a replay; the token is the ledger sequence after the
-- grant, so tokens only grow. A ledger behind its witness is marked fenced and grants nothing.
-- A held permit whose lease expired more than the skew margin ago (by this server's clock)
-- is taken back before the grant; it is granted again only with a larger token. That holds
-- for the job's own grant too: a retry after its lease lapsed gets a new grant, not a replay.
-- A replay reports the time left on the lease, never an instant of this server's clock:
-- the caller adds it to its own clock read before the request, so that the holder's expiry
-- is never later than the ledger's whatever the offset between the two clocks.
local job, minSeq, lease, skew = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3] or '0'), tonumber(ARGV[4] or '0')
local logged = ARGV[5] ~= '0'
local function seg()
  if logged then return segment() end
  return {}
end
if job == nil or job == '' then return invalid('empty job ID') end
if not minSeq or minSeq < 0 then return invalid('bad minimum sequence') end
if not lease or lease < 0 or lease ~= math.floor(lease) or not skew or skew < 0 or skew ~= math.floor(skew) then
  return invalid('bad lease or skew (whole milliseconds >= 0)')
end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(minSeq)
if fenced then return {'fenced', seq} end
local now = now_us()
local taken = reclaim_job(job, now, skew)
local cur = redis.call('HGET', jobs, job)
if cur then
  local sep = string.find(cur, ':', 1, true)
  local exp = redis.call('ZSCORE', leases, job)
  local left, leased = 0, 0
  if exp then left, leased = tonumber(exp) * 1000 - now, 1 end
  return {'ok', tonumber(string.sub(cur, 1, sep - 1)), tonumber(string.sub(cur, sep + 1)), 'dup', seg(), left, leased, taken}
end
taken = taken + reclaim(now, skew, 16)
local first = redis.call('ZRANGE', free, 0, 0)
if #first == 0 then return {'exhausted', seq, taken} end
local p = first[1]
redis.call('ZREM', free, p)
seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('HSET', jobs, job, p .. ':' .. seq)
redis.call('HSET', held, p, job)
redis.call('ZREM', released, job)
local leased = 0
if lease > 0 then
  leased = 1
  redis.call('ZADD', leases, lease_end(now, lease), job)
end
if logged then log_step(seq, 'acquire:' .. p .. ':' .. job) end
return {'ok', tonumber(p), seq, 'new', seg(), lease * 1000, leased, taken}
