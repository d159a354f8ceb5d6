-- store_put.lua: the example's own store (not the library's): bump a post's version and
-- write its body in one step.
-- KEYS[1]  the post's hash (fields v, body)
-- ARGV[1]  the new body
-- Reply    the new version
--
-- Invariant: a post's version only grows, and the body stored is the one of that version
-- (both fields change in this one step).
local post = KEYS[1]
local v = redis.call('HINCRBY', post, 'v', 1)
redis.call('HSET', post, 'body', ARGV[1])
return v
