-- acquire.lua: grant the lowest free permit to a job, once per job ID.
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
-- ARGV[2]  minimum sequence (the witness; 0 for a Central limiter)
-- ARGV[3]  lease in milliseconds (0: the grant has no lease)
-- ARGV[4]  clock-skew margin in milliseconds
-- ARGV[5]  '1' to log the step and return the segment (a Pool, whose witness confirms it),
--          '0' not to (a Central, which has no witness chain)
-- Reply: {'ok', permit, token, 'new'|'dup', segment, lease expiry (server ms, 0 if none)}
--        (segment: see step.lua) | {'exhausted', seq} | {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a permit moves from free to held by exactly one job; a retried acquire of the
-- same job returns the same permit and token; the token is the ledger sequence after the
-- grant, so tokens only grow. A ledger behind its witness is marked fenced and grants nothing.
-- A held permit whose lease expired more than the skew margin ago (by this server's clock)
-- is taken back before the grant; it is granted again only with a larger token.
local job, minSeq, lease, skew = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3] or '0'), tonumber(ARGV[4] or '0')
local logged = ARGV[5] ~= '0'
local function seg()
  if logged then return segment() end
  return {}
end
if job == nil or job == '' then return invalid('empty job ID') end
if not minSeq or minSeq < 0 then return invalid('bad minimum sequence') end
if not lease or lease < 0 or not skew or skew < 0 then return invalid('bad lease or skew') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(minSeq)
if fenced then return {'fenced', seq} end
local cur = redis.call('HGET', jobs, job)
if cur then
  local sep = string.find(cur, ':', 1, true)
  return {'ok', tonumber(string.sub(cur, 1, sep - 1)), tonumber(string.sub(cur, sep + 1)), 'dup', seg(),
    tonumber(redis.call('ZSCORE', leases, job) or '0')}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now - skew, 'LIMIT', 0, 16)
for _, j in ipairs(expired) do
  local rec = redis.call('HGET', jobs, j)
  if rec then
    local p = string.sub(rec, 1, string.find(rec, ':', 1, true) - 1)
    redis.call('HDEL', jobs, j)
    redis.call('HDEL', held, p)
    redis.call('ZADD', free, p, p)
  end
  redis.call('ZREM', leases, j)
end
local first = redis.call('ZRANGE', free, 0, 0)
if #first == 0 then return {'exhausted', seq} end
local p = first[1]
redis.call('ZREM', free, p)
seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('HSET', jobs, job, p .. ':' .. seq)
redis.call('HSET', held, p, job)
local exp = 0
if lease > 0 then
  exp = now + lease
  redis.call('ZADD', leases, exp, job)
end
if logged then log_step(seq, 'acquire:' .. p .. ':' .. job) end
return {'ok', tonumber(p), seq, 'new', seg(), exp}
