-- load.lua: add one Router's per-tenant operation counts of one interval to the fleet's
-- load summary in the control Redis.
--
-- Both keys are under the hash tag "{<prefix>:load}", so they share one slot.
-- KEYS[1]  interval  HASH of one interval: t:<tenant> = operations, e:<tenant> = their error bound,
--                    ops = every operation counted, r:<instance> = 1 per report added,
--                    from / to = the interval's bounds (unix ms)
-- KEYS[2]  index     ZSET of the intervals published: member = KEYS[1]'s suffix, score = to
-- ARGV[1]  instance  the reporting Router's instance ID (non-empty); the report ID is
--                    instance + the interval, so a retried report counts once
-- ARGV[2]  from      start of the interval, unix ms (integer >= 0)
-- ARGV[3]  to        end of the interval, unix ms (integer > from)
-- ARGV[4]  ttl       lifetime of both keys, ms (integer >= 1); index members older than to - ttl
--                    are trimmed
-- ARGV[5]  ops       every operation the Router counted in the interval (integer >= 0)
-- ARGV[6]  member    KEYS[1]'s suffix, the index member (non-empty)
-- ARGV[7..] triplets: tenant (non-empty), count (integer >= 1), error (integer >= 0)
-- Reply: {"ok"} when the report was added, {"dup"} when this instance's report of this
--   interval was added before (nothing changed).
-- Invariant: each Router's counts of an interval are added at most once, whatever the
--   retries: the report ID is recorded in the same hash, in the same step as the additions.

local interval, index = KEYS[1], KEYS[2]
local instance, member = ARGV[1], ARGV[6]
local from, to, ttl, ops = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

local function int(v, least)
  return v ~= nil and v == math.floor(v) and v >= least and v < 2^53
end
if #KEYS ~= 2 then
  return redis.error_reply('ERR routing load: want 2 keys')
end
if instance == nil or instance == '' or member == nil or member == '' then
  return redis.error_reply('ERR routing load: empty instance or index member')
end
if not int(from, 0) or not int(to, 0) or to <= from then
  return redis.error_reply('ERR routing load: from and to must be integers with 0 <= from < to')
end
if not int(ttl, 1) then
  return redis.error_reply('ERR routing load: ttl must be an integer >= 1')
end
if not int(ops, 0) then
  return redis.error_reply('ERR routing load: ops must be an integer >= 0')
end
if (#ARGV - 6) % 3 ~= 0 then
  return redis.error_reply('ERR routing load: tenant/count/error triplets expected')
end
for i = 7, #ARGV, 3 do
  if ARGV[i] == '' or not int(tonumber(ARGV[i + 1]), 1) or not int(tonumber(ARGV[i + 2]), 0) then
    return redis.error_reply('ERR routing load: bad triplet at ' .. i)
  end
end

if redis.call('HSETNX', interval, 'r:' .. instance, 1) == 0 then
  return {'dup'}
end
redis.call('HINCRBY', interval, 'ops', ops)
for i = 7, #ARGV, 3 do
  redis.call('HINCRBY', interval, 't:' .. ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] ~= '0' then
    redis.call('HINCRBY', interval, 'e:' .. ARGV[i], ARGV[i + 2])
  end
end
local old = tonumber(redis.call('HGET', interval, 'from'))
if old == nil or from < old then
  redis.call('HSET', interval, 'from', ARGV[2])
end
old = tonumber(redis.call('HGET', interval, 'to'))
if old == nil or to > old then
  redis.call('HSET', interval, 'to', ARGV[3])
end
redis.call('PEXPIRE', interval, ttl)
redis.call('ZADD', index, to, member)
redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. (to - ttl))
redis.call('PEXPIRE', index, ttl)
return {'ok'}
