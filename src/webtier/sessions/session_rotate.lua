-- Move a framework's session to a new id (Django's cycle_key, Flask's
-- regenerate: the session fixation defence at login), atomically: the old
-- id is dead the moment the new one exists, and the data, cart, viewed
-- items, created time and own expiry move with it. Both ids are in one
-- shard, so in one slot (the caller picks the new id so).
--
-- KEYS[1] = the session under its old id (hash; see session_touch.lua)
-- KEYS[2] = the session under its new id
-- KEYS[3] = the shard's recency index (zset id -> last seen, server µs)
-- ARGV[1] = old id, ARGV[2] = new id
-- ARGV[3] = backstop ms plus how late it may be set: the index outlives it
-- ARGV[4] = the session's user as the caller knows it ('' anonymous), whose
--           index the caller listed the new id in first
-- Returns 1 when moved; 0 when there is no session under the old id; -1
-- when the new id is taken; -2 when the session's user is another (nothing
-- moved: the new id would be missing from its user's index).

local old, new, recent = KEYS[1], KEYS[2], KEYS[3]
local user = redis.call('HGET', old, 'u')
if redis.call('EXISTS', old) == 0 then
  redis.call('ZREM', recent, ARGV[1])
  return 0
end
if (user or '') ~= ARGV[4] then return -2 end
if redis.call('EXISTS', new) == 1 then return -1 end
redis.call('RENAME', old, new) -- keeps the key's expiry
local now_text, now_ms = server_now()
-- Above every score of the shard, as a touch scores (session_prelude.lua).
redis.call('ZREM', recent, ARGV[1])
redis.call('ZADD', recent, above_every_score(recent, now_text), ARGV[2])
-- The ZREM may have emptied (so deleted) the index and the ZADD made it anew.
redis.call('PEXPIREAT', recent, string.format('%d', now_ms + ARGV[3]))
return 1
