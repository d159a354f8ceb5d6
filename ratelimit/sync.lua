-- sync.lua: add one instance's unsynced counts of a key to the shared per-sub-window
-- counts, once per sequence number, and return the shared count of the current window.
--
-- KEYS[1]  the key's base "<prefix>{<hash>}:a:<key>". Sub-window hashes are
--          "<KEYS[1]>:<index>" (field n); "<KEYS[1]>:s" maps instance -> last applied
--          sequence number. Both are derived from KEYS[1] and share its hash tag, hence
--          its slot.
-- ARGV[1]  sub: sub-window length, milliseconds, 1..8.64e7
-- ARGV[2]  k: sub-windows summed, 1..1001 (SubWindows+1 for Sliding, 1 for Fixed)
-- ARGV[3]  instance ID, 1..64 bytes
-- ARGV[4]  seq: this sync's sequence number, 1..2^53, increasing per instance
-- ARGV[5..] pairs of (sub-window index, count >= 1), at most k+2 pairs
-- Reply: {'ok', count, now_ms, applied}: count = cells counted in the k sub-windows ending
-- at the server's current one; applied = 1 if the counts were added now, 0 if seq was
-- already applied (a retry) or older.
--   bad arguments: an error 'ERR ratelimit: <what>', before any write
-- Invariant: each (instance, seq) adds its counts at most once; counts for sub-windows
-- that have left the window (or lie more than one sub-window ahead) are dropped.
local base = KEYS[1]

local function int(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 16 then return nil end
  return tonumber(s)
end

local sub = int(ARGV[1])
local k = int(ARGV[2])
local inst = ARGV[3]
local seq = int(ARGV[4])
if not sub or sub < 1 or sub > 86400000 then return redis.error_reply('ERR ratelimit: bad sub-window') end
if not k or k < 1 or k > 1001 then return redis.error_reply('ERR ratelimit: bad sub-window count') end
if type(inst) ~= 'string' or #inst < 1 or #inst > 64 then return redis.error_reply('ERR ratelimit: bad instance') end
if not seq or seq < 1 or seq > 9007199254740992 then return redis.error_reply('ERR ratelimit: bad sequence') end
if (#ARGV - 4) % 2 ~= 0 or (#ARGV - 4) / 2 > k + 2 then return redis.error_reply('ERR ratelimit: bad counts') end
local pairs_ = {}
for i = 5, #ARGV, 2 do
  local idx, c = int(ARGV[i]), int(ARGV[i + 1])
  if not idx or not c or c < 1 or c > 1099511627776 then return redis.error_reply('ERR ratelimit: bad counts') end
  pairs_[#pairs_ + 1] = {idx, c}
end

local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local cur = math.floor(now / sub)
local seqs = base .. ':s'

local applied = 0
local last = tonumber(redis.call('HGET', seqs, inst) or '0') or 0
if seq > last then
  for _, p in ipairs(pairs_) do
    if p[1] > cur - k and p[1] <= cur + 1 then
      local key = base .. ':' .. string.format('%.0f', p[1])
      redis.call('HINCRBY', key, 'n', p[2])
      redis.call('PEXPIREAT', key, (p[1] + k + 1) * sub)
    end
  end
  redis.call('HSET', seqs, inst, seq)
  redis.call('PEXPIRE', seqs, 2 * k * sub + 60000)
  applied = 1
end

local count = 0
for j = cur - k + 1, cur do
  count = count + (tonumber(redis.call('HGET', base .. ':' .. string.format('%.0f', j), 'n') or '0') or 0)
end
return {'ok', count, now, applied}
