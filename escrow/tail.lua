-- tail.lua: read the part of a ledger's log the witness needs (read-only).
--
-- KEYS[1]  meta of one ledger
-- KEYS[2]  log of the same ledger (same hash tag, one slot)
-- ARGV[1]  top (the witness's highest confirmed sequence)
-- ARGV[2]  mine (the sequence of the step the caller wants confirmed)
-- Reply: {seq, fenced (0|1), id of the step at mine ('' if the log has none), lowest
--        sequence in the log (0 if empty), {seq, id, ...}: the last step at or below top and
--        every step above it (at most 1024)}.
-- Invariant: read-only and atomic: the sequence, the fence and the steps are one state of
-- the ledger, so a step the reply shows at mine is the ledger's step there at that moment.
local meta, log = KEYS[1], KEYS[2]
local top, mine = tonumber(ARGV[1]), tonumber(ARGV[2])
if not top or not mine then return redis.error_reply('ERR escrow: bad tail arguments') end
local m = redis.call('HMGET', meta, 'seq', 'fenced')
local at = redis.call('ZRANGEBYSCORE', log, mine, mine, 'LIMIT', 0, 1)
local low = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
local steps = {}
local below = redis.call('ZREVRANGEBYSCORE', log, top, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
if #below > 0 then
  steps[1] = tonumber(below[2])
  steps[2] = below[1]
end
local above = redis.call('ZRANGEBYSCORE', log, '(' .. top, '+inf', 'WITHSCORES', 'LIMIT', 0, 1024)
for i = 1, #above, 2 do
  steps[#steps + 1] = tonumber(above[i + 1])
  steps[#steps + 1] = above[i]
end
return {tonumber(m[1]) or 0, tonumber(m[2]) or 0, at[1] or '', tonumber(low[2] or '0'), steps}
