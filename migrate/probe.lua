-- probe.lua: read a unit's ownership record and a range of its change log on the source
-- shard in one atomic step, with what the log has lost to trimming.
--
-- Both keys carry the unit's hash tag, so they share one slot.
-- KEYS[1]  own  HASH   ownership record
-- KEYS[2]  log  STREAM change log
-- ARGV[1]  after  read entries strictly after this ID ("0-0" for all)
-- ARGV[2]  last   read entries up to this ID, inclusive ("+" for the end)
-- ARGV[3]  count  maximum entries to read (integer >= 0; 0 reads none)
-- ARGV[4]  tenant optional, for a carve-out out of a bucket: the tenant whose moved-out mark to
--                 report
-- Reply: {gen, state, lastid, maxdeleted, added, length, entries[, mark]}: the ownership record
--   ("0", "" when missing), the last change-log ID ever generated, the largest ID ever
--   removed by XDEL ("0-0" when none), the number of entries ever added, the number present
--   (Redis >= 7.0), the entries read (XRANGE's reply), and with a tenant its mark: "" when
--   the tenant is not marked as moved out, else the carve-out that marked it ("-" if none
--   did: routing's Provision).
-- Invariant: read-only. Because the read is atomic, a reader that knows how many entries had
--   been added up to `after` can tell whether any entry after it was trimmed (trimming
--   removes the oldest entries first) before the returned entries were read; every entry
--   after lastid is appended after this probe.

if not string.match(ARGV[3] or "", "^%d+$") then
  return redis.error_reply("ERR migrate probe: count must be an integer")
end
if ARGV[1] == "" or ARGV[2] == "" then
  return redis.error_reply("ERR migrate probe: empty range")
end
local own = redis.call("HMGET", KEYS[1], "gen", "state")
local last, maxdel, added, length, entries = "0-0", "0-0", "0", "0", {}
if redis.call("EXISTS", KEYS[2]) == 1 then
  local info = redis.call("XINFO", "STREAM", KEYS[2])
  for i = 1, #info, 2 do
    if info[i] == "last-generated-id" then last = info[i + 1] end
    if info[i] == "max-deleted-entry-id" then maxdel = info[i + 1] end
    if info[i] == "entries-added" then added = tostring(info[i + 1]) end
    if info[i] == "length" then length = tostring(info[i + 1]) end
  end
  local n = tonumber(ARGV[3])
  if n > 0 then
    entries = redis.call("XRANGE", KEYS[2], "(" .. ARGV[1], ARGV[2], "COUNT", n)
  end
end
if ARGV[4] then
  if ARGV[4] == "" then return redis.error_reply("ERR migrate probe: empty tenant") end
  local m = redis.call("HMGET", KEYS[1], "x:" .. ARGV[4], "xm:" .. ARGV[4])
  local mark = ""
  if m[1] then mark = m[2] or "-" end
  return {own[1] or "0", own[2] or "", last, maxdel, added, length, entries, mark}
end
return {own[1] or "0", own[2] or "", last, maxdel, added, length, entries}
