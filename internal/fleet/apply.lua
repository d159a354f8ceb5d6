-- apply.lua: change the hot set (promotions and demotions), fenced and versioned.
--
-- KEYS[1]  the hot set's meta hash (fields version, vid, epoch) }
-- KEYS[2]  the leader lease                                   } one slot: {<prefix>hot}
-- KEYS[3]  the members hash: key -> "a|<rate>|<ms>" (decided by the fleet) or "m|<rate>|<ms>" (manual)
-- KEYS[4]  the demotions hash: key -> "<rate>|<ms>", the rate that decided the last demotion
-- ARGV[1]  the leader's instance ID, or "" for a manual change (no fence, ops m+ and m-)
-- ARGV[2]  the leader's epoch (ignored for a manual change)
-- ARGV[3]  now, milliseconds
-- ARGV[4]  the most members allowed
-- ARGV[5]  demotions TTL, ms
-- ARGV[6]  the hot-set channel, on which a change is announced
-- ARGV[7..] triples: op ("+", "-", "m+", "m-"), key, rate
--
-- Reply: {"ok", version, changed, announcement} or {"fenced", version, 0, ""}. When the set
-- changed, the announcement (also published on the channel in this step) carries the change:
-- "d<version> <previous vid> <vid>\n" then, per key changed, "<kind>|<rate>|<now>|<length of key>:<key>", kind
-- "a" or "m" for the member's new record (as in the members hash) and "-" for a removal. An
-- instance that applied version-1 with the previous vid applies it without reading the set.
-- Over announceMax bytes it is "<version> <vid>" alone (the instances read the set). "" when
-- nothing changed. vid names this version of the set among all that ever had its number: a
-- master that lost its last change (a restore, a lossy failover) makes that number again
-- with another vid, so an instance that applied the lost one sees it is not the fleet's.
-- Invariant: only the current leader (lease and epoch checked in this step) changes what the
-- fleet decided; a manual member is never demoted by the fleet; the version grows by one per
-- call that altered the set, and the announcement lists every change of that call, so
-- version-1 plus the announcement is the set at version. A retry (same ops) changes nothing,
-- bumps nothing and announces nothing.
local meta, lease, members, demoted = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, epoch, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local max, dttl, channel = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local announceMax = 65536
if not now or not max or max < 1 or not dttl or dttl < 1 then
  return redis.error_reply('ERR celebrity: apply: bad now, max or demotions TTL')
end
if channel == nil or channel == '' then
  return redis.error_reply('ERR celebrity: apply: empty channel')
end
if (#ARGV - 6) % 3 ~= 0 then
  return redis.error_reply('ERR celebrity: apply: op/key/rate triples expected')
end
for i = 7, #ARGV, 3 do
  local op, r = ARGV[i], tonumber(ARGV[i + 2])
  local ok = (id == '' and (op == 'm+' or op == 'm-')) or (id ~= '' and (op == '+' or op == '-'))
  if not ok or ARGV[i + 1] == '' or not r or r < 0 then
    return redis.error_reply('ERR celebrity: apply: bad triple at ' .. i)
  end
end
local version = tonumber(redis.call('HGET', meta, 'version') or '0')
if id ~= '' then
  if redis.call('GET', lease) ~= id or redis.call('HGET', meta, 'epoch') ~= epoch then
    return {'fenced', version, 0, ''}
  end
end
local changed, parts = 0, {}
for i = 7, #ARGV, 3 do
  local op, key, rate = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local cur = redis.call('HGET', members, key)
  if op == '+' and not cur and redis.call('HLEN', members) < max then
    redis.call('HSET', members, key, 'a|' .. rate .. '|' .. now)
    redis.call('HDEL', demoted, key)
    changed = changed + 1
    parts[#parts + 1] = 'a|' .. rate .. '|' .. now .. '|' .. #key .. ':' .. key
  elseif op == 'm+' and (not cur or string.sub(cur, 1, 1) ~= 'm') then
    redis.call('HSET', members, key, 'm|' .. rate .. '|' .. now)
    redis.call('HDEL', demoted, key)
    changed = changed + 1
    parts[#parts + 1] = 'm|' .. rate .. '|' .. now .. '|' .. #key .. ':' .. key
  elseif (op == '-' and cur and string.sub(cur, 1, 1) == 'a') or (op == 'm-' and cur) then
    redis.call('HDEL', members, key)
    redis.call('HSET', demoted, key, rate .. '|' .. now)
    redis.call('PEXPIRE', demoted, dttl)
    changed = changed + 1
    parts[#parts + 1] = '-|' .. rate .. '|' .. now .. '|' .. #key .. ':' .. key
  end
end
if changed == 0 then
  return {'ok', version, 0, ''}
end
local prev = redis.call('HGET', meta, 'vid') or '-'
version = redis.call('HINCRBY', meta, 'version', 1)
local tm = redis.call('TIME')
local vid = version .. '.' .. tm[1] .. '.' .. tm[2]
redis.call('HSET', meta, 'vid', vid)
local msg = 'd' .. version .. ' ' .. prev .. ' ' .. vid .. '\n' .. table.concat(parts)
if #msg > announceMax then
  msg = version .. ' ' .. vid
end
redis.call('PUBLISH', channel, msg)
return {'ok', version, changed, msg}
