-- mark.lua: the marker of a Central's ledger, on the witness client.
--
-- KEYS[1]  the marker (a string: the creation ID of the ledger that was activated)
-- ARGV[1]  mode 'claim' (set the marker to the ID if it is absent) | 'force' (set it:
--          RestoreLost only)
-- ARGV[2]  creation ID (non-empty)
-- Reply: {'ok', marker} (the marker after the call).
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a marker, once set, names one creation of the ledger; only an operator's
-- RestoreLost replaces it. A ledger is activated only if the marker names its creation, so a
-- ledger re-created by an Init that read the marker before an earlier ledger existed (and was
-- then lost) never grants.
local marker, mode, id = KEYS[1], ARGV[1], ARGV[2]
if id == nil or id == '' then return redis.error_reply('ERR escrow: empty creation ID') end
if mode == 'force' then
  redis.call('SET', marker, id)
elseif mode == 'claim' then
  if redis.call('EXISTS', marker) == 0 then redis.call('SET', marker, id) end
else
  return redis.error_reply('ERR escrow: bad mark mode')
end
return {'ok', redis.call('GET', marker)}
