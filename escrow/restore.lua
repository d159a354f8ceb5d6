-- restore.lua: the pool-wide register that lets one RestoreLost at a time put lost permits back.
--
-- KEYS[1]  the register of one pool (a hash: n = number of restores claimed, busy = ID of the
--          restore claimed and not yet done ('' if none), owner and permits of that restore),
--          on the witness client
-- ARGV[1]  mode 'read' | 'claim' | 'done'
-- ARGV[2]  restore ID (non-empty)
-- ARGV[3]  (claim) the n the caller read before it read the pool
-- ARGV[4]  (claim) owner
-- ARGV[5]  (claim) the permits, as text
-- Reply: read: {'ok', n, busy, owner, permits} ('' where unset); claim: {'ok'} (claimed) | {'resume', owner, permits} (this ID holds the claim: a retry
--        puts back what the claim recorded) | {'busy', id} (another restore holds the claim) |
--        {'moved', n} (a restore was claimed after the caller read n: its reading of the pool
--        may be stale); done: {'ok'}; bad arguments: an error 'ERR escrow: <what>', before any write.
-- Invariant: a restore is claimed only by a caller whose reading of the pool came after every
-- earlier restore was done (n unchanged since its read, nothing busy), so two restores never
-- both find the same permits missing and put them back at two owners. A claim is released only
-- by the same ID after its permits are back; a caller that died in between is resumed by a
-- retry with the same ID.
local key, mode, id = KEYS[1], ARGV[1], ARGV[2]
if id == nil or id == '' then return redis.error_reply('ERR escrow: empty restore ID') end
local busy = redis.call('HGET', key, 'busy') or ''
if mode == 'read' then
  local r = redis.call('HMGET', key, 'n', 'owner', 'permits')
  return {'ok', tonumber(r[1] or '0'), busy, r[2] or '', r[3] or ''}
end
if mode == 'done' then
  if busy == id then redis.call('HSET', key, 'busy', '') end
  return {'ok'}
end
if mode ~= 'claim' then return redis.error_reply('ERR escrow: bad restore mode') end
local expected = tonumber(ARGV[3])
if not expected or expected < 0 or ARGV[4] == nil or ARGV[4] == '' or ARGV[5] == nil then
  return redis.error_reply('ERR escrow: bad claim arguments')
end
if busy == id then
  local r = redis.call('HMGET', key, 'owner', 'permits')
  return {'resume', r[1], r[2]}
end
if busy ~= '' then return {'busy', busy} end
local n = tonumber(redis.call('HGET', key, 'n') or '0')
if n ~= expected then return {'moved', n} end
redis.call('HSET', key, 'n', n + 1, 'busy', id, 'owner', ARGV[4], 'permits', ARGV[5])
return {'ok'}
