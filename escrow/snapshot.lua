-- snapshot.lua: read one ledger atomically (read-only).
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
-- ARGV  none
-- Reply: {exists (0|1), seq, fenced, free permits, held (permit, job, ...), jobs (job,
--        "permit:token", ...), out (T, json, ...), in (T, json, ...), leases (job, expiry in
--        server ms, ...), the server's clock in ms (rounded down)}.
-- Invariant: the read is atomic, so the ledger it shows was one state of the ledger.
local now = math.floor(now_us() / 1000)
if redis.call('EXISTS', meta) == 0 then return {0, 0, 0, {}, {}, {}, {}, {}, {}, now} end
local m = redis.call('HMGET', meta, 'seq', 'fenced')
return {1, tonumber(m[1]), tonumber(m[2]),
  redis.call('ZRANGE', free, 0, -1), redis.call('HGETALL', held),
  redis.call('HGETALL', jobs), redis.call('HGETALL', out), redis.call('HGETALL', inbox),
  redis.call('ZRANGE', leases, 0, -1, 'WITHSCORES'), now}
