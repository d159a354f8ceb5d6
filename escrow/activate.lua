-- activate.lua: activate, or drop, a Central ledger created pending by init.lua.
--
-- KEYS[1]  meta of one ledger; the nine keys share one hash tag, so one slot (layout:
--          step.lua)
-- KEYS[2]  free
-- KEYS[3]  jobs
-- KEYS[4]  held
-- KEYS[5]  out
-- KEYS[6]  in
-- KEYS[7]  log
-- KEYS[8]  leases
-- KEYS[9]  released
-- ARGV[1]  mode 'activate' | 'drop'
-- ARGV[2]  creation ID (activate: the ID the marker names)
-- Reply: activate: {'ok'} (active: this call activated it, or it was active already) |
--        {'other', ID} (a pending ledger of another creation: it stays pending) | {'missing', 0};
--        drop: {'dropped'} | {'active'} (an active ledger is never dropped) | {'missing', 0};
--        bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a pending ledger has granted nothing (it is fenced), so dropping it loses
-- nothing; it becomes active only under the creation ID its marker names.
local mode, id = ARGV[1], ARGV[2] or ''
if mode ~= 'activate' and mode ~= 'drop' then return invalid('bad activate mode') end
if mode == 'activate' and id == '' then return invalid('empty creation ID') end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local m = redis.call('HMGET', meta, 'cid', 'pending')
if mode == 'drop' then
  if m[2] ~= '1' then return {'active'} end
  redis.call('DEL', unpack(KEYS))
  return {'dropped'}
end
if m[2] ~= '1' then return {'ok'} end
if m[1] ~= id then return {'other', m[1] or ''} end
redis.call('HSET', meta, 'fenced', 0)
redis.call('HDEL', meta, 'pending')
return {'ok'}
