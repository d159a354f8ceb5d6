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
-- ARGV[8]  how many instances this report stands for in the leader's estimate of the fleet's
--          size (a non-negative integer: K, the intervals between its turns, on its turn; 0
--          otherwise), added to the field "n"
-- ARGV[9..] pairs: key, rate (reads per second, a non-negative number); a rate written "t<rate>"
--          is a sampled one (an instance's reads times K, on its turn), added to the field
--          "t:<key>" (the leader scales those by the fleet's size over "n"), the others to
--          "k:<key>"
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
if #ARGV < 8 or (#ARGV - 8) % 2 ~= 0 then
  return redis.error_reply('ERR celebrity: report: key/rate pairs expected')
end
local npairs = (#ARGV - 8) / 2
local weight = tonumber(ARGV[8])
if not weight or weight < 0 or weight ~= math.floor(weight) then
  return redis.error_reply('ERR celebrity: report: the weight must be a non-negative integer')
end
local nudging, slow = tonumber(ARGV[6]), tonumber(ARGV[7])
if not slow or slow < 0 or slow ~= math.floor(slow) or slow > npairs then
  return redis.error_reply('ERR celebrity: report: the slow pairs must be 0..pairs')
end
if not nudging or nudging < 0 or nudging ~= math.floor(nudging) or nudging > npairs - slow then
  return redis.error_reply('ERR celebrity: report: the nudging pairs must be 0..pairs-slow')
end
-- rateOf splits a pair's rate into its field prefix and its number.
local function rateOf(v)
  if string.sub(v, 1, 1) == 't' then
    return 't:', string.sub(v, 2)
  end
  return 'k:', v
end
for i = 9, #ARGV, 2 do
  local _, v = rateOf(ARGV[i + 1])
  local r = tonumber(v)
  if ARGV[i] == '' or not r or r < 0 or r ~= r or r == math.huge then
    return redis.error_reply('ERR celebrity: report: bad pair at ' .. i)
  end
end
if redis.call('HSETNX', sum, 'r:' .. id, 1) == 0 then
  return {'dup', 0}
end
if weight > 0 then
  redis.call('HINCRBY', sum, 'n', weight)
end
local cross = false
for i = 9, #ARGV, 2 do
  local n = (i - 9) / 2
  if n >= npairs - slow then
    redis.call('HINCRBYFLOAT', sum, 's:' .. ARGV[i], ARGV[i + 1])
  else
    local field, v = rateOf(ARGV[i + 1])
    local r = tonumber(v)
    local now = tonumber(redis.call('HINCRBYFLOAT', sum, field .. ARGV[i], v))
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
