-- sweep.lua: take back the permits of a ledger whose leases lapsed, without a grant.
--
-- KEYS[1]  meta of one ledger; the ledger's keys share one hash tag, so one slot (layout:
--          step.lua)
-- KEYS[2]  free
-- KEYS[3]  jobs
-- KEYS[4]  held
-- KEYS[5]  out
-- KEYS[6]  in
-- KEYS[7]  log
-- KEYS[8]  leases
-- KEYS[9]  released
-- ARGV[1]  clock-skew margin in milliseconds (>= 0)
-- ARGV[2]  the most permits to take back in this call (1..1024)
-- Reply: {'ok', permits taken back, 1 if lapsed leases are left else 0} | {'fenced', seq} |
--        {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a permit returns to free from held only when its job's lease ended more than
-- the margin ago by this server's clock, as in acquire.lua; a repeated sweep finds nothing
-- more (the job's record is gone), so it never adds capacity. Like a release it is not a
-- logged step and does not move the sequence, and a fenced ledger refuses it.
local skew, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if not skew or skew < 0 or skew ~= math.floor(skew) then return invalid('bad skew') end
if not limit or limit < 1 or limit > 1024 or limit ~= math.floor(limit) then return invalid('bad limit (1..1024)') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(0)
if fenced then return {'fenced', seq} end
local now = now_us()
local taken = reclaim(now, skew, limit)
local more = 0
if #redis.call('ZRANGEBYSCORE', leases, '-inf', '(' .. lapsed_before(now, skew), 'LIMIT', 0, 1) > 0 then more = 1 end
return {'ok', taken, more}
