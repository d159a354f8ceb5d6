-- report.lua: add one instance's Redis-level read rates of one interval to the fleet summary.
--
-- KEYS[1]  the summary hash of one interval on one shard (<prefix>{<prefix>sum<shard>}:<slot>)
-- ARGV[1]  report ID: the reporting instance's ID for its regular report, or the ID followed by
--          ":early" for its early report (at most two per instance per interval, the instance
--          sending each key in at most one of them)
-- ARGV[2]  TTL of the summary hash, milliseconds (>= 1)
-- ARGV[3]  nudge level: PromoteRate divided by the number of shards (a non-negative number;
--          0: no nudge)
-- ARGV[4]  the hot-set channel
-- ARGV[5]  the nudge message ("n<interval>")
-- ARGV[6]  how many of the pairs, from the first, may nudge (the keys the reporter does not
--          apply as hot: a hot key needs no promotion, so its sum nudges nobody)
-- ARGV[7]  how many of the pairs, from the last, are the slow lane's (lukewarm keys' average
--          rates, added to the fields "s:<key>"; the others to "k:<key>"); they never nudge
-- ARGV[8..] pairs: key, rate (reads per second, a non-negative number)
--
-- Reply: {"ok", nudged (1 if this report published the nudge)}, or {"dup", 0} when this
-- report ID was already added.
-- Invariant: each instance's rates count at most once per interval, whatever the retries:
-- the report ID is recorded in the same hash, in the same step as the additions. A key's sum
-- on this shard only grows, so it crosses the nudge level at most once per interval: at most
-- one nudge per key, shard and interval (a retry is a "dup" and publishes nothing).
local sum = KEYS[1]
local id, ttl, level = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local channel, message = ARGV[4], ARGV[5]
if id == nil or id == '' then
  return redis.error_reply('ERR celebrity: report: empty report ID')
end
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('ERR celebrity: report: TTL must be a positive integer')
end
if not level or level < 0 or level ~= level or level == math.huge then
  return redis.error_reply('ERR celebrity: report: nudge level must be a non-negative number')
end
if channel == nil or channel == '' or message == nil or message == '' then
  return redis.error_reply('ERR celebrity: report: empty channel or nudge message')
end
if #ARGV < 7 or (#ARGV - 7) % 2 ~= 0 then
  return redis.error_reply('ERR celebrity: report: key/rate pairs expected')
end
local npairs = (#ARGV - 7) / 2
local nudging, slow = tonumber(ARGV[6]), tonumber(ARGV[7])
if not slow or slow < 0 or slow ~= math.floor(slow) or slow > npairs then
  return redis.error_reply('ERR celebrity: report: the slow pairs must be 0..pairs')
end
if not nudging or nudging < 0 or nudging ~= math.floor(nudging) or nudging > npairs - slow then
  return redis.error_reply('ERR celebrity: report: the nudging pairs must be 0..pairs-slow')
end
for i = 8, #ARGV, 2 do
  local r = tonumber(ARGV[i + 1])
  if ARGV[i] == '' or not r or r < 0 or r ~= r or r == math.huge then
    return redis.error_reply('ERR celebrity: report: bad pair at ' .. i)
  end
end
if redis.call('HSETNX', sum, 'r:' .. id, 1) == 0 then
  return {'dup', 0}
end
local cross = false
for i = 8, #ARGV, 2 do
  local n = (i - 8) / 2
  if n >= npairs - slow then
    redis.call('HINCRBYFLOAT', sum, 's:' .. ARGV[i], ARGV[i + 1])
  else
    local r = tonumber(ARGV[i + 1])
    local now = tonumber(redis.call('HINCRBYFLOAT', sum, 'k:' .. ARGV[i], ARGV[i + 1]))
    if level > 0 and n < nudging and now >= level and now - r < level then
      cross = true
    end
  end
end
redis.call('PEXPIRE', sum, ttl)
if cross then
  redis.call('PUBLISH', channel, message)
  return {'ok', 1}
end
return {'ok', 0}
