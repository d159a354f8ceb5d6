-- witness.lua: raise the witness of one ledger to at least the given sequence.
--
-- KEYS: 1 the witness key of one owner (its own hash tag, deliberately NOT the ledger's slot).
-- ARGV: 1 sequence (integer >= 1).
-- Reply: the witness value after the call.
-- Invariant: the witness never decreases, so a retried or reordered raise is harmless.
local s = tonumber(ARGV[1])
if not s or s < 1 or s ~= math.floor(s) then return redis.error_reply('ERR escrow: bad witness sequence') end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if s > cur then
  redis.call('SET', KEYS[1], s)
  return s
end
return cur
