-- step.lua: the names of a ledger's keys and the functions shared by the scripts that work on
-- a ledger. Lua has no include: scripts.go prepends this file to each of them at init.
--
-- KEYS[1]  meta (hash: seq, fenced, first, last, cap; a Central's also cid, pending); the
--          nine keys of one ledger share one hash tag, so one slot
-- KEYS[2]  free (zset permit->permit)
-- KEYS[3]  jobs (hash job->"permit:token")
-- KEYS[4]  held (hash permit->job)
-- KEYS[5]  out  (hash transfer->json)
-- KEYS[6]  in, named inbox (in is a Lua keyword) (hash in_key(source, T)->json)
-- KEYS[7]  log  (zset step ID->sequence)
-- KEYS[8]  leases (zset job->lease expiry in server milliseconds, for jobs granted with a lease)
-- KEYS[9]  released (zset job->server microseconds at the release, the last RELEASED_KEEP
--          released jobs, so a replayed release reports the permit released)
-- ARGV  none of its own.
-- Reply: none; it defines names only.
-- Invariant: a ledger keeps a log of its steps in log (score = the sequence after the step,
-- member = the step ID). A step ID is a SHA1 over the previous step's ID, the new sequence,
-- the server time and what the step did, so it commits to the whole history before it: two
-- histories that split (a ledger restored to an earlier point that then moved on) never
-- share a step ID after the split. The log keeps the last LOG_KEEP steps. Every script that
-- changes or confirms ledger state returns the last SEGMENT steps ({seq, id, ...}); the
-- caller hands them to the witness (witness.lua), and acknowledges nothing the witness has
-- not confirmed.
local meta, free, jobs, held = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local out, inbox, log, leases, released = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local LOG_KEEP = 1024
local RELEASED_KEEP = 1024
local SEGMENT = 8

-- invalid refuses a bad argument, before any write.
local function invalid(msg)
  return redis.error_reply('ERR escrow: ' .. msg)
end

-- fence_check returns the ledger's sequence and whether the ledger refuses changes: marked
-- fenced, or behind its witness (seq < min_seq), which it marks fenced in the same step.
local function fence_check(min_seq)
  local seq = tonumber(redis.call('HGET', meta, 'seq'))
  if redis.call('HGET', meta, 'fenced') == '1' then return seq, true end
  if seq < min_seq then
    redis.call('HSET', meta, 'fenced', 1)
    return seq, true
  end
  return seq, false
end

-- in_key is the field of the in hash that holds the answer about transfer t from source
-- from: transfer IDs are unique per source only. inKey in audit.go is the same formula.
local function in_key(from, t)
  return string.len(from) .. ':' .. from .. ':' .. t
end

-- log_step appends the step that brought the ledger to seq.
local function log_step(seq, what)
  local last = redis.call('ZRANGE', log, -1, -1)
  local t = redis.call('TIME')
  local id = string.sub(redis.sha1hex((last[1] or '') .. '|' .. seq .. '|' .. t[1] .. '.' .. t[2] .. '|' .. what), 1, 24)
  redis.call('ZADD', log, seq, id)
  redis.call('ZREMRANGEBYRANK', log, 0, -(LOG_KEEP + 1))
end

-- now_us returns the server's clock in microseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- lease_end returns the expiry, in server milliseconds, of a lease of lease_ms starting at
-- now (microseconds), rounded up: a holder counts its lease from a moment before the
-- request, so the ledger's expiry is never earlier than the holder's.
local function lease_end(now, lease_ms)
  return math.floor((now + 999) / 1000) + lease_ms
end

-- take_back frees the permit of job j if it holds one, and forgets j's lease. It returns 1
-- if a permit was freed.
local function take_back(j)
  local n = 0
  local rec = redis.call('HGET', jobs, j)
  if rec then
    local p = string.sub(rec, 1, string.find(rec, ':', 1, true) - 1)
    redis.call('HDEL', jobs, j)
    redis.call('HDEL', held, p)
    redis.call('ZADD', free, p, p)
    n = 1
  end
  redis.call('ZREM', leases, j)
  return n
end

-- lapsed_before returns the lease score below which a lease ended more than skew_ms before
-- now (microseconds), by this server's clock, rounded down so that a lease is never taken
-- back early.
local function lapsed_before(now, skew_ms)
  return math.floor(now / 1000) - skew_ms
end

-- reclaim takes back up to limit permits whose lease ended more than skew_ms before now
-- (microseconds), and returns the number of permits freed.
local function reclaim(now, skew_ms, limit)
  local n = 0
  local lapsed = redis.call('ZRANGEBYSCORE', leases, '-inf', '(' .. lapsed_before(now, skew_ms), 'LIMIT', 0, limit)
  for _, j in ipairs(lapsed) do n = n + take_back(j) end
  return n
end

-- reclaim_job takes back job j's permit if its lease ended more than skew_ms before now
-- (microseconds); it returns 1 if a permit was freed.
local function reclaim_job(j, now, skew_ms)
  local exp = redis.call('ZSCORE', leases, j)
  if exp and tonumber(exp) < lapsed_before(now, skew_ms) then return take_back(j) end
  return 0
end

-- segment returns the ledger's last SEGMENT steps, {seq, id, ...}, oldest first.
local function segment()
  local r = redis.call('ZRANGE', log, -SEGMENT, -1, 'WITHSCORES')
  local steps = {}
  for i = 1, #r, 2 do
    steps[#steps + 1] = tonumber(r[i + 1])
    steps[#steps + 1] = r[i]
  end
  return steps
end

