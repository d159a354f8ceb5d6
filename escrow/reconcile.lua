-- reconcile.lua: bring a fenced (or lost) ledger back in line with the rest of the pool.
--
-- KEYS: the six keys of one ledger (meta, free, jobs, held, out, in), one slot.
-- ARGV: 1 witness sequence, 2 capacity, 3 first, 4 last (the owner's initial range, kept as
--       metadata only), 5 n = number of permits to drop, 6..5+n the permits, then triples
--       (transfer ID, source owner, comma-separated permits) of accepted transfers to restore.
-- Reply: {'ok', seq} | {'invalid', msg}.
-- Invariant: the caller (Pool.Reconcile) computed from every other ledger which permits this
-- ledger must no longer claim (they are free, held or frozen elsewhere) and which accepted
-- transfers it lost. After the script the sequence is above the witness, so every fencing
-- token granted from now on is larger than any token the lost state could have granted.
local wit, cap, first, last, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not (wit and cap and first and last and n) or wit < 0 or n < 0 then return {'invalid', 'bad numeric argument'} end
if (#ARGV - 5 - n) % 3 ~= 0 then return {'invalid', 'bad transfer triples'} end
for i = 6, 5 + n do
  if not tonumber(ARGV[i]) then return {'invalid', 'bad permit'} end
end
for i = 6 + n, #ARGV, 3 do
  if ARGV[i] == '' or ARGV[i + 1] == '' then return {'invalid', 'empty transfer ID or source'} end
  for p in string.gmatch(ARGV[i + 2], '[^,]+') do
    local x = tonumber(p)
    if not x or x < 1 or x > cap then return {'invalid', 'permit out of range'} end
  end
end
local seq = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  seq = tonumber(redis.call('HGET', KEYS[1], 'seq'))
else
  redis.call('HSET', KEYS[1], 'first', first, 'last', last, 'cap', cap)
end
for i = 6, 5 + n do
  local p = ARGV[i]
  redis.call('ZREM', KEYS[2], p)
  local j = redis.call('HGET', KEYS[4], p)
  if j then
    redis.call('HDEL', KEYS[4], p)
    redis.call('HDEL', KEYS[3], j)
  end
end
for i = 6 + n, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[6], ARGV[i]) == 0 then
    local nums = {}
    for p in string.gmatch(ARGV[i + 2], '[^,]+') do
      nums[#nums + 1] = tonumber(p)
      redis.call('ZADD', KEYS[2], p, p)
    end
    redis.call('HSET', KEYS[6], ARGV[i], cjson.encode({s = 'accepted', from = ARGV[i + 1], p = nums}))
  end
end
if wit > seq then seq = wit end
seq = seq + 1
redis.call('HSET', KEYS[1], 'seq', seq, 'fenced', 0)
return {'ok', seq}
