-- poll.lua: read the hot set's version and take or renew the fleet's leader lease.
--
-- KEYS[1]  the hot set's meta hash (fields version, vid, epoch)           } one slot:
-- KEYS[2]  the leader lease (a string: the leader's ID)                   } {<prefix>hot}
-- KEYS[3]  the fleet's size as a leader last estimated it (expiring)     }
-- ARGV[1]  this instance's ID in the fleet ("<InstanceID>/<nonce>": two instances given one
--          InstanceID are two IDs)
-- ARGV[2]  lease, milliseconds (>= 1)
-- ARGV[3]  the fleet's size as this instance estimates it (a non-negative integer), which a
--          leading instance writes to KEYS[3] unless it is 0
-- ARGV[4]  the life of KEYS[3], milliseconds (>= 1)
--
-- Reply: {"ok", version, leader (1 if this instance leads), epoch, the lease's remaining
--        milliseconds (another leader's; 0 when this instance leads), vid (see apply.lua;
--        "-" before the first change), the leader's ID (another's; "" when this instance
--        leads), the fleet's size as a leader last wrote it (0 if none lives)}
-- Invariant: at most one leader at a time; every new leadership gets a new epoch, in the same
-- step as the lease, so a deposed leader's decisions are refused (apply.lua checks both).
-- A retried poll renews the lease it took: idempotent.
local meta, lease = KEYS[1], KEYS[2]
local id, ttl, size, life = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if id == nil or id == '' then
  return redis.error_reply('ERR celebrity: poll: empty instance ID')
end
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('ERR celebrity: poll: lease must be a positive integer')
end
if not size or size < 0 or size ~= math.floor(size) then
  return redis.error_reply('ERR celebrity: poll: fleet size must be a non-negative integer')
end
if not life or life < 1 or life ~= math.floor(life) then
  return redis.error_reply('ERR celebrity: poll: the size\'s life must be a positive integer')
end
local cur = redis.call('GET', lease)
local lead, left, other = 0, 0, ''
if not cur then
  redis.call('SET', lease, id, 'PX', ttl)
  redis.call('HINCRBY', meta, 'epoch', 1)
  lead = 1
elseif cur == id then
  redis.call('PEXPIRE', lease, ttl)
  lead = 1
else
  left = math.max(redis.call('PTTL', lease), 0)
  other = cur
end
local version = tonumber(redis.call('HGET', meta, 'version') or '0')
local epoch = tonumber(redis.call('HGET', meta, 'epoch') or '0')
local vid = redis.call('HGET', meta, 'vid') or '-'
if lead == 1 and size > 0 then
  redis.call('SET', KEYS[3], size, 'PX', life)
end
local fleet = tonumber(redis.call('GET', KEYS[3]) or '0')
return {'ok', version, lead, epoch, left, vid, other, fleet}
