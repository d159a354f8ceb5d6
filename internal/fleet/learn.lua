-- learn.lua: read the hot set in one step: its version, members and recent demotions.
--
-- KEYS[1]  the hot set's meta hash (fields version, vid)     }
-- KEYS[2]  the members hash (see apply.lua)                  } one slot: {<prefix>hot}
-- KEYS[3]  the demotions hash (see apply.lua)                }
-- ARGV  none
--
-- Reply: {"ok", version, members as field/value pairs, demotions as field/value pairs, vid}
--        (vid: see apply.lua; "-" before the first change)
-- Invariant: read-only; the three reads are one atomic snapshot, so the members are those of
-- the version returned.
local meta, members, demoted = KEYS[1], KEYS[2], KEYS[3]
local version = tonumber(redis.call('HGET', meta, 'version') or '0')
local vid = redis.call('HGET', meta, 'vid') or '-'
return {'ok', version, redis.call('HGETALL', members), redis.call('HGETALL', demoted), vid}
