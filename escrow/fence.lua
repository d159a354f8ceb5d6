-- fence.lua: mark a ledger fenced.
--
-- KEYS[1]  meta of one ledger
-- ARGV  none
-- Reply: {'ok', seq} | {'missing', 0}.
-- Invariant: a fenced ledger refuses every change until Pool.Reconcile. The caller runs this
-- when the witness showed that the ledger's history is not the one the witness confirmed
-- (the ledger was restored to an earlier point), so it cannot hurt a healthy ledger.
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
redis.call('HSET', meta, 'fenced', 1)
return {'ok', tonumber(redis.call('HGET', meta, 'seq'))}
