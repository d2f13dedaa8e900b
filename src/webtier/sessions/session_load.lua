-- Check one session for a request's load: that it is live, and touch it when
-- it was last seen at least ARGV[2] ms ago (as a touch without a user or
-- item: last seen and expiry, never creating a session). The caller has the
-- hash from an HGETALL (ops.load_at): the whole hash crosses into Lua and back
-- out again at a cost of several times the plain HGETALL, so the script reads
-- only the three fields it needs. With ARGV[2] = 0 the HGETALL goes just
-- before it, in the same pipeline; otherwise the caller runs it only when
-- the HGETALL, the session's score and TIME, read together, show it has work
-- (most reads: none). The hash counts only when this script answers that
-- the session is live: a session deleted or moved in between (a logout, a
-- login) then answers 0, and one changed in between was read before the
-- change, as a read that came first.
--
-- KEYS[1] = the session's hash (fields: session_touch.lua)
-- KEYS[2] = the shard's recency index: zset token -> last seen (server µs)
-- ARGV[1] = the token (member of KEYS[2])
-- ARGV[2] = touch when idle this long (ms; 0: always)
-- ARGV[3] = idle timeout ms (0: off)
-- ARGV[4] = absolute timeout ms (0: off)
-- ARGV[5] = backstop ms; ARGV[6] = how late the backstop may be set (ms)
-- Returns {1} for a live session (its only change: `e`), {0} when there is none.
--
-- The same rules as a touch, from session_prelude.lua: the new score is above
-- every score of the shard, so a cleaner that read an older one never removes
-- the session; a session the cleaner removed has no hash and stays dead.

local key, recent, token = KEYS[1], KEYS[2], ARGV[1]
local refresh = ARGV[2] * 1000
local idle, absolute, backstop, lateness = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0

local found = redis.call('HMGET', key, 'c', 'e', 'x')
local created = found[1] and found[1] + 0
local expires = found[2] and found[2] + 0
-- An expiry of its own, saved by a framework's store (session_save.lua).
if found[3] then idle = own_idle(found[3] + 0, idle) end
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
return {1}
