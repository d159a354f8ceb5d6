-- registry.lua: the registry merge shared by set.lua, register.lua and acquire.lua. Lua has
-- no include: each of those scripts is built as this file followed by its own (scripts.go).
--
-- A registry lists the copies a primary record keeps current: "<slot>:<expiry ms>" entries
-- joined by ".", at most 64 of them.
--
-- merge(reg, add, expiry, now) returns the registry reg after adding the slots of add
-- ("<slot>.<slot>...", may be empty), and the latest end it lists (at least expiry):
--   * entries of reg that ended by now (server ms) are dropped; of a slot listed twice, the
--     first entry counts;
--   * an added slot ends no sooner than expiry, and a live entry keeps a later end: no entry
--     is ever shortened;
--   * the added slots come first, in the order of add, then the other live entries in their
--     order, up to 64 entries.
--
-- KEYS  none of its own; merge reads and writes no key.
-- ARGV  none of its own.
-- Reply: none; it defines merge only.
-- Invariant: merge never shortens a live entry: an added slot ends no sooner than expiry,
-- and a live entry keeps a later end it already has.

local function merge(reg, add, expiry, now)
  local ends, order = {}, {}
  for s, e in string.gmatch(reg, '(%d+):(%d+)') do
    e = tonumber(e)
    if e > now and not ends[s] then ends[s] = e; order[#order + 1] = s end
  end
  local added, first = {}, {}
  for s in string.gmatch(add, '%d+') do
    if not added[s] then
      added[s] = true
      ends[s] = math.max(ends[s] or 0, expiry)
      first[#first + 1] = s
    end
  end
  local parts, last = {}, expiry
  local function put(s)
    if #parts < 64 then
      parts[#parts + 1] = s .. ':' .. string.format('%.0f', ends[s])
      last = math.max(last, ends[s])
    end
  end
  for _, s in ipairs(first) do put(s) end
  for _, s in ipairs(order) do
    if not added[s] then put(s) end
  end
  return table.concat(parts, '.'), last
end

