-- renew.lua: extend the lease of a job's grant.
--
-- KEYS[1]  meta of one ledger; the eight keys share one hash tag, so one slot (layout:
--          step.lua)
-- KEYS[2]  free
-- KEYS[3]  jobs
-- KEYS[4]  held
-- KEYS[5]  out
-- KEYS[6]  in
-- KEYS[7]  log
-- KEYS[8]  leases
-- ARGV[1]  job ID (non-empty)
-- ARGV[2]  lease in milliseconds (>= 1)
-- Reply: {'ok', expiry (server ms), segment} (segment: the ledger's last steps, see step.lua;
--        a Pool has the witness confirm them before it acknowledges the renewal) | {'none', 0} (the job holds nothing here: released,
--        reclaimed after its lease, or never granted) | {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: only a job that still holds its permit gets a new expiry; a reclaimed job never
-- gets its permit back by renewing, and a renewal on a ledger restored to a point where the job
-- still held its permit is not acknowledged (the witness does not confirm that history).
local job, lease = ARGV[1], tonumber(ARGV[2])
if job == nil or job == '' then return invalid('empty job ID') end
if not lease or lease < 1 or lease ~= math.floor(lease) then return invalid('bad lease') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(0)
if fenced then return {'fenced', seq} end
if redis.call('HEXISTS', jobs, job) == 0 then return {'none', 0} end
local exp = lease_end(now_us(), lease)
redis.call('ZADD', leases, exp, job)
return {'ok', exp, segment()}
