-- reconcile.lua: bring a fenced (or lost) ledger back in line with the rest of the pool.
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
-- ARGV[1]  sequence floor (the highest witness of the pool)
-- ARGV[2]  capacity
-- ARGV[3]  first
-- ARGV[4]  last (the owner's initial range, kept as metadata)
-- ARGV[5]  JSON plan:
--          {"drop": [permits], "release": [jobs], "add": [{"t": T, "from": owner, "p": [permits]}],
--           "refuse": [{"t": T, "from": owner}], "trim": [{"t": T, "p": [permits kept]}]}
-- ARGV[6]  the state the plan was computed from: 'missing', a sequence (the ledger was fenced
--          at it), or '' (RestoreLost: no check, its own claim orders it)
-- Reply: {'ok', seq, segment} | {'moved', seq} (the ledger is not in the state the plan was
--        computed from; nothing written).
--        Bad arguments: an error 'ERR escrow: <what>', before any write. The log starts anew with the reconcile
--        step; the caller rebases the witness chain on it (witness.lua 'rebase').
-- Invariant: the caller (Pool.Reconcile) computed from every other ledger which permits this
-- ledger must no longer claim (drop: free or held here but present elsewhere; trim: the
-- permits of an outgoing frozen transfer that are elsewhere now), which grants were made after
-- its history left the confirmed one (release: never acknowledged), and which answers about
-- incoming transfers it lost (add: accepted, with the permits nobody else has; refuse:
-- refused, because the source aborted). After the script the sequence is above every witness, so every
-- fencing token granted from now on is larger than any acknowledged token before.
local floor, cap, first, last = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not (floor and cap and first and last) or floor < 0 then return invalid('bad numeric argument') end
local ok, plan = pcall(cjson.decode, ARGV[5] or '')
if not ok or type(plan) ~= 'table' then return invalid('bad plan') end
local function permits(list)
  if type(list) ~= 'table' then return false end
  for _, p in ipairs(list) do
    if type(p) ~= 'number' or p < 1 or p > cap or p ~= math.floor(p) then return false end
  end
  return true
end
plan.drop = plan.drop or {}
plan.add = plan.add or {}
plan.trim = plan.trim or {}
plan.release = plan.release or {}
plan.refuse = plan.refuse or {}
if not permits(plan.drop) then return invalid('bad drop list') end
if type(plan.release) ~= 'table' then return invalid('bad release list') end
for _, j in ipairs(plan.release) do
  if type(j) ~= 'string' or j == '' then return invalid('bad release entry') end
end
if type(plan.refuse) ~= 'table' then return invalid('bad refuse list') end
for _, r in ipairs(plan.refuse) do
  if type(r.t) ~= 'string' or r.t == '' or type(r.from) ~= 'string' or r.from == '' then
    return invalid('bad refuse entry')
  end
end
for _, a in ipairs(plan.add) do
  if type(a.t) ~= 'string' or a.t == '' or type(a.from) ~= 'string' or a.from == '' or not permits(a.p) then
    return invalid('bad add entry')
  end
end
for _, tr in ipairs(plan.trim) do
  if type(tr.t) ~= 'string' or tr.t == '' or not permits(tr.p) then return invalid('bad trim entry') end
end
local expect = ARGV[6] or ''
local exists = redis.call('EXISTS', meta) == 1
if expect == 'missing' then
  if exists then return {'moved', tonumber(redis.call('HGET', meta, 'seq'))} end
elseif expect ~= '' then
  local want = tonumber(expect)
  if not want then return invalid('bad expected state') end
  if not exists then return {'moved', 0} end
  local m = redis.call('HMGET', meta, 'seq', 'fenced')
  if m[2] ~= '1' or tonumber(m[1]) ~= want then return {'moved', tonumber(m[1])} end
end
local seq = 0
if exists then
  seq = tonumber(redis.call('HGET', meta, 'seq'))
else
  redis.call('HSET', meta, 'first', first, 'last', last, 'cap', cap)
end
for _, p in ipairs(plan.drop) do
  redis.call('ZREM', free, p)
  local j = redis.call('HGET', held, p)
  if j then
    redis.call('HDEL', held, p)
    redis.call('HDEL', jobs, j)
    redis.call('ZREM', leases, j)
  end
end
for _, j in ipairs(plan.release) do
  local cur = redis.call('HGET', jobs, j)
  if cur then
    local p = string.sub(cur, 1, string.find(cur, ':', 1, true) - 1)
    redis.call('HDEL', jobs, j)
    redis.call('HDEL', held, p)
    redis.call('ZREM', leases, j)
    redis.call('ZADD', free, p, p)
  end
end
for _, r in ipairs(plan.refuse) do
  local key = in_key(r.from, r.t)
  if redis.call('HEXISTS', inbox, key) == 0 then
    redis.call('HSET', inbox, key, cjson.encode({s = 'refused', from = r.from}))
  end
end
for _, a in ipairs(plan.add) do
  local key = in_key(a.from, a.t)
  if redis.call('HEXISTS', inbox, key) == 0 then
    for _, p in ipairs(a.p) do redis.call('ZADD', free, p, p) end
    redis.call('HSET', inbox, key, cjson.encode({s = 'accepted', from = a.from, p = a.p}))
  end
end
for _, tr in ipairs(plan.trim) do
  local old = redis.call('HGET', out, tr.t)
  if old then
    local r = cjson.decode(old)
    if r.s == 'frozen' then
      r.p = tr.p
      redis.call('HSET', out, tr.t, cjson.encode(r))
    end
  end
end
if floor > seq then seq = floor end
seq = seq + 1
redis.call('HSET', meta, 'seq', seq, 'fenced', 0)
redis.call('DEL', log)
log_step(seq, 'reconcile')
return {'ok', seq, segment()}
