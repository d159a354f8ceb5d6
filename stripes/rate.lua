-- rate.lua: one family's report of a name's writes into the fleet's per-window counts, and
-- the fleet's counts of the current and the previous window.
--
-- KEYS[1]  the rate hash "<prefix>{<name>}:rate:<window ms>" (the layout's slot)
-- ARGV[1]  the reporting family's ID (16 hex digits from crypto/rand)
-- ARGV[2]  the report's sequence number for this name in that family
-- ARGV[3]  the writes reported (0: read only)
-- ARGV[4]  the window the report falls in: the reporter's clock in ms / window ms
-- ARGV[5]  the hash's TTL in ms (three windows)
--
-- Reply: {writes counted in window ARGV[4], writes counted in window ARGV[4] - 1}.
--
-- Fields: "w:<window>" the writes reported in that window; "i:<family ID>" the sequence
-- number of that family's last report.
--
-- Invariant: a family's report is counted at most once. A report whose sequence number is
-- the family's last one (a retry after a lost reply, by go-redis or by the family) adds
-- nothing, so the measure never counts one write twice. Windows older than the previous
-- one are deleted as reports arrive; the whole hash expires three windows after the last
-- report.
local key = KEYS[1]
local id, seq, n, w = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if n > 0 and redis.call('HGET', key, 'i:' .. id) ~= seq then
  redis.call('HSET', key, 'i:' .. id, seq)
  redis.call('HINCRBY', key, 'w:' .. ARGV[4], n)
  redis.call('HDEL', key, 'w:' .. string.format('%d', w - 2))
  redis.call('PEXPIRE', key, ARGV[5])
end
return {tonumber(redis.call('HGET', key, 'w:' .. ARGV[4]) or '0'),
  tonumber(redis.call('HGET', key, 'w:' .. string.format('%d', w - 1)) or '0')}
