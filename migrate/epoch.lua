-- epoch.lua: take a new fencing epoch for a unit without driving a migration (an operator
-- clearing a stuck claim).
--
-- KEYS[1]  epochs  STRING the unit's epoch counter (see acquire.lua)
-- ARGV  none.
-- Reply: {"ok", epoch}.
-- Invariant: epochs of one unit never repeat and only grow.

local epochs = KEYS[1]
return {"ok", tostring(redis.call("INCR", epochs))}
