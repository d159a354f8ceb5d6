-- init.lua: create a ledger holding permits First..Last, unless it exists or was lost.
--
-- KEYS[1]  meta (hash: seq, fenced, first, last, cap); the nine keys of the ledger share
--          one hash tag, so one slot
-- KEYS[2]  free (zset permit->permit)
-- KEYS[3]  jobs (hash job->"permit:token")
-- KEYS[4]  held (hash permit->job)
-- KEYS[5]  out  (hash transfer->json)
-- KEYS[6]  in   (hash transfer->json)
-- KEYS[7]  log  (zset step ID->sequence, see step.lua)
-- KEYS[8]  leases (zset job->lease expiry in server milliseconds, for jobs granted with a lease)
-- KEYS[9]  released (zset job->server microseconds at the release, the last 1024
--          released jobs, so a replayed release reports the permit released)
-- ARGV[1]  first
-- ARGV[2]  last
-- ARGV[3]  capacity
-- ARGV[4]  witness sequence (0 when there is no witness yet)
-- ARGV[5]  starting sequence (optional, default 1: Central.RestoreLost starts above the lost
--          ledger's tokens)
-- ARGV[6]  creation ID (optional; a Central's): the new ledger is created pending (fenced,
--          grants nothing) until activate.lua finds its marker recording this ID
-- Reply: {'created', seq, segment} | {'exists', first, last, cap, segment, creation ID ('' if
--        none), pending (0|1)} | {'missing', 0}.
--        Bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a ledger is created at most once. A ledger whose witness shows it existed
-- (witness > 0) is never re-created from its initial range: that would resurrect permits
-- that were granted or transferred away. It stays missing until Pool.Reconcile.
local first, last, cap, wit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local start = tonumber(ARGV[5] or '1')
if not (first and last and cap and wit and start) then return invalid('non-numeric argument') end
if start < 1 or start ~= math.floor(start) then return invalid('bad starting sequence') end
if first < 1 or last > cap or first > last or wit < 0 then
  return invalid('permit range out of bounds')
end
if redis.call('EXISTS', meta) == 1 then
  local m = redis.call('HMGET', meta, 'first', 'last', 'cap', 'cid', 'pending')
  return {'exists', tonumber(m[1]), tonumber(m[2]), tonumber(m[3]), segment(), m[4] or '', tonumber(m[5] or '0')}
end
if wit > 0 then return {'missing', 0} end
local batch = {}
for p = first, last do
  batch[#batch + 1] = p
  batch[#batch + 1] = p
  if #batch >= 2000 then
    redis.call('ZADD', free, unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('ZADD', free, unpack(batch)) end
redis.call('HSET', meta, 'seq', start, 'fenced', 0, 'first', first, 'last', last, 'cap', cap)
local cid = ARGV[6] or ''
if cid ~= '' then redis.call('HSET', meta, 'cid', cid, 'pending', 1, 'fenced', 1) end
redis.call('DEL', log)
log_step(start, 'init')
return {'created', start, segment()}
