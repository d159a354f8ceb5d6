-- witness.lua: extend the witness chain of one ledger with steps of the ledger's log.
--
-- KEYS[1]  the witness chain of one owner (a sorted set: score = ledger sequence, member =
--          step ID), in a slot chosen to be on another master than the ledger
-- ARGV[1]  mode 'confirm' | 'rebase'
-- ARGV[2..] pairs of sequence and step ID, ascending: a run of consecutive steps of the
--          ledger's log (see step.lua)
-- Reply: {'ok', top} (the chain passes through the last step given) | {'gap', top, topID}
--        (the run starts above the chain's top: the caller must read more of the log) |
--        {'behind', top, topID} (the run ends below the chain's top: the caller checks that
--        the ledger's log, read after this reply, holds the chain's top) | {'conflict', top,
--        topID} (the ledger's history is not the one confirmed: it was restored to an earlier
--        point) | an error for bad arguments.
-- Invariant: the chain is one history. A run is appended only where it passes through the
-- chain's top with the same step ID, and since a step ID commits to every step before it,
-- the ledger's history up to the top is then the confirmed one. 'rebase' (Reconcile only)
-- starts a new chain at a step above the old top; repeating it with the same step is a no-op.
local chain, mode = KEYS[1], ARGV[1]
local KEEP = 1024
if mode ~= 'confirm' and mode ~= 'rebase' then return redis.error_reply('ERR escrow: bad witness mode') end
local n = (#ARGV - 1) / 2
if n < 1 or n ~= math.floor(n) then return redis.error_reply('ERR escrow: witness needs sequence/ID pairs') end
local seqs, ids = {}, {}
for i = 1, n do
  local s, id = tonumber(ARGV[2 * i]), ARGV[2 * i + 1]
  if not s or s < 1 or s ~= math.floor(s) or id == '' or (i > 1 and s <= seqs[i - 1]) then
    return redis.error_reply('ERR escrow: witness pairs must be ascending sequences with IDs')
  end
  seqs[i], ids[i] = s, id
end
local last = redis.call('ZRANGE', chain, -1, -1, 'WITHSCORES')
local top, topID = 0, nil
if #last > 0 then top, topID = tonumber(last[2]), last[1] end
local function append(from)
  for i = from, n do redis.call('ZADD', chain, seqs[i], ids[i]) end
  redis.call('ZREMRANGEBYRANK', chain, 0, -(KEEP + 1))
  return {'ok', math.max(top, seqs[n])}
end
if mode == 'rebase' then
  -- A repeat (go-redis retrying after a lost reply) finds its own step on top.
  if seqs[n] == top and ids[n] == topID then return {'ok', top} end
  if seqs[n] <= top then return {'behind', top} end
  redis.call('DEL', chain)
  return append(n)
end
if top == 0 then return append(1) end
for i = 1, n do
  if seqs[i] == top then
    if ids[i] ~= topID then return {'conflict', top, topID} end
    return append(i + 1)
  end
end
if seqs[1] > top then return {'gap', top, topID} end
if seqs[n] < top then return {'behind', top, topID} end
return {'conflict', top, topID}
