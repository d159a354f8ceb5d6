-- learn.lua: read the hot set in one step: its version, members and recent demotions.
--
-- KEYS[1]  the hot set's meta hash (field version)          }
-- KEYS[2]  the members hash (see apply.lua)                  } one slot: {<prefix>hot}
-- KEYS[3]  the demotions hash (see apply.lua)                }
-- ARGV     none
--
-- Reply: {version, members as field/value pairs, demotions as field/value pairs}
-- Invariant: read-only; the three reads are one atomic snapshot, so the members are those of
-- the version returned.
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
return {version, redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
