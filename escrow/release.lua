-- release.lua: free the permit held by a job, once.
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
-- Reply: {'ok', permit} | {'dup', 0} (a replay: the job holds nothing, and released its
--        permit here earlier, one of the last RELEASED_KEEP releases) | {'none', 0} (the
--        job holds nothing: taken back after its lease, never granted, or released longer
--        ago) | {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a permit returns to free only from held, and only once; a repeated release finds
-- no job and changes nothing, so it can never add capacity; it finds the job in released,
-- so the caller of a release whose reply was lost learns that the permit was freed. A release is not a logged step
-- and does not move the sequence: it does not go through the witness, and a ledger that lost
-- writes must not climb back to its witness through releases.
local job = ARGV[1]
if job == nil or job == '' then return invalid('empty job ID') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(0)
if fenced then return {'fenced', seq} end
local cur = redis.call('HGET', jobs, job)
if not cur then
  if redis.call('ZSCORE', released, job) then return {'dup', 0} end
  return {'none', 0}
end
local p = string.sub(cur, 1, string.find(cur, ':', 1, true) - 1)
redis.call('HDEL', jobs, job)
redis.call('HDEL', held, p)
redis.call('ZREM', leases, job)
redis.call('ZADD', free, p, p)
redis.call('ZADD', released, now_us(), job)
redis.call('ZREMRANGEBYRANK', released, 0, -(RELEASED_KEEP + 1))
return {'ok', tonumber(p)}
