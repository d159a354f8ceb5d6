-- renew.lua: extend the lease of a job's grant.
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
-- ARGV[2]  lease in milliseconds (>= 1)
-- ARGV[3]  clock-skew margin in milliseconds (>= 0)
-- Reply: {'ok', expiry (server ms), segment} (segment: the ledger's last steps, see step.lua;
--        a Pool has the witness confirm them before it acknowledges the renewal) |
--        {'none', 0, permits taken back} (the job holds nothing here: released, reclaimed
--        after its lease, its lease ended more than the margin ago, or never granted) |
--        {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: only a job that still holds its permit gets a new expiry; a reclaimed job never
-- gets its permit back by renewing, nor does a job whose lease ended more than the margin ago
-- by this server's clock (its permit may already be another job's, granted by a history a
-- restore forgot): its permit is taken back instead, and a renewal on a ledger restored to a point where the job
-- still held its permit is not acknowledged (the witness does not confirm that history).
local job, lease, skew = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if job == nil or job == '' then return invalid('empty job ID') end
if not lease or lease < 1 or lease ~= math.floor(lease) then return invalid('bad lease') end
if not skew or skew < 0 or skew ~= math.floor(skew) then return invalid('bad skew') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(0)
if fenced then return {'fenced', seq} end
local now = now_us()
local taken = reclaim_job(job, now, skew)
if redis.call('HEXISTS', jobs, job) == 0 then return {'none', 0, taken} end
local exp = lease_end(now, lease)
redis.call('ZADD', leases, exp, job)
return {'ok', exp, segment()}
