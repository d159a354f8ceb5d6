-- snapshot.lua: read one ledger atomically (read-only).
--
-- KEYS: the eight keys of one ledger (meta, free, jobs, held, out, in, log,
--       leases), one slot.
-- ARGV: none.
-- Reply: {exists (0|1), seq, fenced, free permits, held (permit, job, ...), jobs (job,
--        "permit:token", ...), out (T, json, ...), in (T, json, ...), leases (job, expiry in
--        server ms, ...)}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0, 0, {}, {}, {}, {}, {}, {}} end
local m = redis.call('HMGET', KEYS[1], 'seq', 'fenced')
return {1, tonumber(m[1]), tonumber(m[2]),
  redis.call('ZRANGE', KEYS[2], 0, -1), redis.call('HGETALL', KEYS[4]),
  redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[5]), redis.call('HGETALL', KEYS[6]),
  redis.call('ZRANGE', KEYS[8], 0, -1, 'WITHSCORES')}
