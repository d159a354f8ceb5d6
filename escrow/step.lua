-- step.lua: shared functions, prepended to every script that advances a ledger's sequence.
--
-- A ledger keeps a log of its steps in KEYS[7] (a sorted set: score = the sequence after the
-- step, member = the step ID). A step ID is a SHA1 over the previous step's ID, the new
-- sequence, the server time and what the step did, so it commits to the whole history before
-- it: two histories that split (a ledger restored to an earlier point that then moved on)
-- never share a step ID after the split. The log keeps the last LOG_KEEP steps. Every script
-- that changes or confirms ledger state returns the last SEGMENT steps ({seq, id, ...}); the
-- caller hands them to the witness (witness.lua), and acknowledges nothing the witness has
-- not confirmed.
local LOG_KEEP = 1024
local SEGMENT = 8

local function log_step(log, seq, what)
  local last = redis.call('ZRANGE', log, -1, -1)
  local t = redis.call('TIME')
  local id = string.sub(redis.sha1hex((last[1] or '') .. '|' .. seq .. '|' .. t[1] .. '.' .. t[2] .. '|' .. what), 1, 24)
  redis.call('ZADD', log, seq, id)
  redis.call('ZREMRANGEBYRANK', log, 0, -(LOG_KEEP + 1))
end

local function segment(log)
  local r = redis.call('ZRANGE', log, -SEGMENT, -1, 'WITHSCORES')
  local out = {}
  for i = 1, #r, 2 do
    out[#out + 1] = tonumber(r[i + 1])
    out[#out + 1] = r[i]
  end
  return out
end

