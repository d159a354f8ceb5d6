-- report.lua: add one instance's Redis-level read rates of one interval to the fleet summary.
--
-- KEYS[1]  the summary hash of one interval on one shard (<prefix>{<prefix>sum<shard>}:<slot>)
-- ARGV[1]  report ID: the reporting instance's ID for its regular report, or the ID followed by
--          ":early" for its early report (at most two per instance per interval, the instance
--          sending each key in at most one of them)
-- ARGV[2]  TTL of the summary hash, milliseconds (>= 1)
-- ARGV[3..] pairs: key, rate (reads per second, a non-negative number)
--
-- Reply: {"ok"} when added, {"dup"} when this report ID was already added.
-- Invariant: each instance's rates count at most once per interval, whatever the retries:
-- the report ID is recorded in the same hash, in the same step as the additions.
local sum = KEYS[1]
local id, ttl = ARGV[1], tonumber(ARGV[2])
if id == nil or id == '' then
  return redis.error_reply('ERR celebrity: report: empty report ID')
end
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('ERR celebrity: report: TTL must be a positive integer')
end
if (#ARGV - 2) % 2 ~= 0 then
  return redis.error_reply('ERR celebrity: report: key/rate pairs expected')
end
for i = 3, #ARGV, 2 do
  local r = tonumber(ARGV[i + 1])
  if ARGV[i] == '' or not r or r < 0 or r ~= r or r == math.huge then
    return redis.error_reply('ERR celebrity: report: bad pair at ' .. i)
  end
end
if redis.call('HSETNX', sum, 'r:' .. id, 1) == 0 then
  return {'dup'}
end
for i = 3, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', sum, 'k:' .. ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', sum, ttl)
return {'ok'}
