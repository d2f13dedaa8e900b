-- End sessions of one shard (logout, revoke), atomically with their index entries.
--
-- KEYS[1]     = the shard's recency index (zset token -> last seen)
-- KEYS[1 + i] = session i (hash; see session_touch.lua)
-- ARGV[i]     = token of session i
-- ARGV[n + i] = (optional) user session i must belong to, or '' for any
-- Returns, per session, its user ('' if anonymous), or false if it was not
-- ended (no such session, or another user's).

local n = #KEYS - 1
local ended = {}
for i = 1, n do
  local key, token, owner = KEYS[1 + i], ARGV[i], ARGV[n + i] or ''
  local user = redis.call('HGET', key, 'u')
  local exists = redis.call('EXISTS', key) == 1
  if exists and (owner == '' or user == owner) then
    redis.call('DEL', key)
    redis.call('ZREM', KEYS[1], token)
    ended[i] = user or ''
  else
    if not exists then redis.call('ZREM', KEYS[1], token) end
    ended[i] = false
  end
end
return ended
