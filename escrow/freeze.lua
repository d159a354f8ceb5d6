-- freeze.lua: step 1 of a transfer, at the source: freeze k free permits under transfer T.
--
-- KEYS[1]  meta of the source ledger; the ledger's keys share one hash tag, so one slot (layout:
--          step.lua)
-- KEYS[2]  free
-- KEYS[3]  jobs
-- KEYS[4]  held
-- KEYS[5]  out
-- KEYS[6]  in
-- KEYS[7]  log
-- KEYS[8]  leases
-- KEYS[9]  released
-- ARGV[1]  transfer ID T
-- ARGV[2]  target owner
-- ARGV[3]  k (1..cap)
-- ARGV[4]  minimum sequence (the witness)
-- ARGV[5]  clock-skew margin of leases in milliseconds (optional: without it no lease is
--          taken back)
-- Reply: {'ok', state, seq, json record, segment, 'new'|'dup', permits taken back} (state
--        frozen|done|aborted; a repeat of T returns the stored record; segment: see
--        step.lua) | {'insufficient', free, permits taken back} | {'conflict', json} |
--        {'fenced', seq} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: frozen permits leave the free set in the same step that records T, so from this
-- commit on the source can no longer grant them. T is frozen at most once. Before it counts
-- the free permits, a new freeze takes back the permits whose lease ended more than the
-- margin ago (as acquire.lua does), so a dead holder's permits can move.
local t, to, k, minSeq, skew = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
if t == nil or t == '' then return invalid('empty transfer ID') end
if to == nil or to == '' then return invalid('empty target') end
if not k or k < 1 or k ~= math.floor(k) then return invalid('k must be a positive integer') end
if not minSeq or minSeq < 0 then return invalid('bad minimum sequence') end
if skew ~= nil then
  skew = tonumber(skew)
  if not skew or skew < 0 or skew ~= math.floor(skew) then return invalid('bad skew') end
end
if redis.call('EXISTS', meta) == 0 then return {'missing', 0} end
local seq, fenced = fence_check(minSeq)
if fenced then return {'fenced', seq} end
local old = redis.call('HGET', out, t)
if old then
  local r = cjson.decode(old)
  if r.to ~= to or r.k ~= k then return {'conflict', old} end
  return {'ok', r.s, r.seq, old, segment(), 'dup', 0}
end
local taken = 0
if skew ~= nil then taken = reclaim(now_us(), skew, redis.call('ZCARD', leases)) end
local n = redis.call('ZCARD', free)
if n < k then return {'insufficient', n, taken} end
local ps = redis.call('ZRANGE', free, 0, k - 1)
local nums = {}
for i, p in ipairs(ps) do
  nums[i] = tonumber(p)
  redis.call('ZREM', free, p)
end
seq = redis.call('HINCRBY', meta, 'seq', 1)
local rec = cjson.encode({s = 'frozen', to = to, k = k, seq = seq, p = nums})
redis.call('HSET', out, t, rec)
log_step(seq, 'freeze:' .. t)
return {'ok', 'frozen', seq, rec, segment(), 'new', taken}
