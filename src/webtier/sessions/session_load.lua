-- Load one session for a request, in one round trip: check that it is live,
-- touch it when it was last seen at least ARGV[2] ms ago (as a touch without
-- a user or item: last seen and expiry, never creating a session), and return
-- its whole hash, which the request then reads instead of asking again.
--
-- KEYS[1] = the session's hash (fields: session_touch.lua)
-- KEYS[2] = the shard's recency index: zset token -> last seen (server µs)
-- ARGV[1] = the token (member of KEYS[2])
-- ARGV[2] = touch when idle this long (ms; 0: always)
-- ARGV[3] = idle timeout ms (0: off)
-- ARGV[4] = absolute timeout ms (0: off)
-- ARGV[5] = backstop ms; ARGV[6] = how late the backstop may be set (ms)
-- Returns {1, {field, value, ...}} (the hash as it was before the touch,
-- whose only change is `e`) for a live session, {0} when there is none.
--
-- The same rules as a touch, from session_prelude.lua: the new score is above
-- every score of the shard, so a cleaner that read an older one never removes
-- the session; a session the cleaner removed has no hash and stays dead.

local key, recent, token = KEYS[1], KEYS[2], ARGV[1]
local refresh = ARGV[2] * 1000
local idle, absolute, backstop, lateness = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0

local fields = redis.call('HGETALL', key)
-- The two fields the touch needs, from the reply rather than by another call
-- (a call costs more than this pass over a session's few dozen fields).
local created, expires = false, false
for i = 1, #fields, 2 do
  local name = fields[i]
  if name == 'c' then
    created = fields[i + 1] + 0
  elseif name == 'e' then
    expires = fields[i + 1] + 0
  elseif name == 'x' then
    idle = own_idle(fields[i + 1] + 0, idle) -- saved by a framework's store
  end
end
if not created then
  -- Expired or cleaned: forget any index entry left behind, as a touch does.
  redis.call('ZREM', recent, token)
  return {0}
end

local now_text, now_ms = server_now()
local deadline, late =
  touch_deadline(key, recent, token, now_ms, created, idle, absolute, backstop, lateness)
if not deadline then return {0} end

-- Missing from the index (it is rebuilt by touches): touched now, which lists it.
local seen = redis.call('ZSCORE', recent, token)
if not seen or now_text - seen >= refresh then
  local expire_text = expiry_due(expires, deadline, late)
  if expire_text then redis.call('HSET', key, 'e', expire_text) end
  mark_seen(key, recent, token, now_text, now_ms, expire_text, backstop, lateness)
end
return {1, fields}
