-- Log a session in: move it to a new token (session fixation defence) with
-- its data and viewed items, set its user and its merged cart, atomically.
-- Both tokens are in one shard, so in one slot (the caller picks the new
-- token so).
--
-- KEYS[1] = the session under its old token (hash; see session_touch.lua)
-- KEYS[2] = the session under its new token
-- KEYS[3] = the shard's recency index (zset token -> last seen, server µs)
-- ARGV[1] = old token, ARGV[2] = new token, ARGV[3] = user
-- ARGV[4] = idle timeout ms (0: off), ARGV[5] = absolute timeout ms (0: off),
-- ARGV[6] = backstop ms, ARGV[7] = how late the backstop may be set, ms
-- ARGV[8] = E, the number of cart lines the caller read from the old session;
-- ARGV[9 .. 8 + 2E] = those lines, item and count
-- ARGV[9 + 2E ..] = the merged cart the session gets, item and count
-- Returns {1, previous user or '', the new session's hash (HGETALL)} when
-- done (the caller's request reads it without another round trip); {0} when
-- there is no session;
-- {-2} when the new token is taken; {-3} when the cart changed since the
-- caller read it (nothing written: read again and retry).

local old, new, recent = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', old) == 0 then
  redis.call('ZREM', recent, ARGV[1])
  return {0}
end
if redis.call('EXISTS', new) == 1 then return {-2} end

local expected = tonumber(ARGV[8])
local lines = {}
local fields = redis.call('HGETALL', old)
for i = 1, #fields, 2 do
  local name = fields[i]
  if #name > 1 and string.byte(name) == 107 then lines[name] = fields[i + 1] end -- 'k'
end
local held = 0
for _ in pairs(lines) do held = held + 1 end
if held ~= expected then return {-3} end
for i = 9, 8 + 2 * expected, 2 do
  if lines['k' .. ARGV[i]] ~= ARGV[i + 1] then return {-3} end
end

local previous = redis.call('HGET', old, 'u') or ''
redis.call('RENAME', old, new)
for field in pairs(lines) do redis.call('HDEL', new, field) end
for i = 9 + 2 * expected, #ARGV, 2 do redis.call('HSET', new, 'k' .. ARGV[i], ARGV[i + 1]) end

local now_text, now_ms = server_now()
-- A login starts the authenticated session: the absolute timeout counts from it.
redis.call('HSET', new, 'u', ARGV[3], 'c', string.format('%d', now_ms))

-- Above every score of the shard, as a touch scores (session_prelude.lua).
redis.call('ZREM', recent, ARGV[1])
redis.call('ZADD', recent, above_every_score(recent, now_text), ARGV[2])

-- Expiry as a touch sets it: the timeouts exact, the backstop up to
-- ARGV[7] ms late; `e` says when, so touches know when to move it.
local idle, absolute, backstop, lateness = ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0
local own = redis.call('HGET', new, 'x') -- saved by a framework's store
if own then idle = own_idle(own + 0, idle) end
local deadline, late = session_deadline(now_ms, now_ms, idle, absolute, backstop, lateness)
local expires = string.format('%d', deadline + late)
redis.call('HSET', new, 'e', expires)
redis.call('PEXPIREAT', new, expires)
redis.call('PEXPIREAT', recent, string.format('%d', now_ms + backstop + lateness))
return {1, previous, redis.call('HGETALL', new)}
