-- Shared by the session scripts that write a session's expiry and its place
-- in the recency index (session_touch.lua, session_load.lua, session_login.lua): Script.load
-- puts this file before each of them, so the rules below exist once.

-- The server's time as (microseconds, as text; milliseconds, as a number).
local function server_now()
  local time = redis.call('TIME')
  local micros = time[2]
  return time[1] .. string.rep('0', 6 - #micros) .. micros,
    time[1] * 1000 + math.floor(micros / 1000)
end

-- When a session seen at `now_ms` and created at `created` expires, and how
-- late its key may be set to expire (ms). The idle and absolute timeouts are
-- exact; the backstop only bounds memory, so it may be set `lateness` ms late
-- (and is then moved only when a touch finds it due).
local function session_deadline(now_ms, created, idle, absolute, backstop, lateness)
  local deadline, late = now_ms + backstop, lateness
  if idle > 0 and now_ms + idle <= deadline then deadline, late = now_ms + idle, 0 end
  if absolute > 0 and created + absolute <= deadline then deadline, late = created + absolute, 0 end
  return deadline, late
end

-- The idle timeout of a session with an expiry of its own (`x`, ms: set by a
-- framework's store, session_save.lua): its own, but never longer than the
-- tier's, which the cleaner counts as stale past it.
local function own_idle(own, idle)
  if idle > 0 and idle < own then return idle end
  return own
end

-- session_deadline for a touch, or false for a session already past it (its
-- key not yet expired by the server), which is deleted here with its entry.
local function touch_deadline(
  key, recent, token, now_ms, created, idle, absolute, backstop, lateness
)
  local deadline, late = session_deadline(now_ms, created, idle, absolute, backstop, lateness)
  if deadline <= now_ms then
    redis.call('DEL', key)
    redis.call('ZREM', recent, token)
    return false
  end
  return deadline, late
end

-- The last-seen score for a session seen now: the server's time, but above
-- every score of the shard, so a touched session is the newest of its shard
-- whatever the clocks do, and a cleaner that removes only entries up to a
-- score it read earlier never removes it (session_clean.lua). ZCOUNT answers
-- with an integer, where reading the top score would have the server format
-- a double.
local function above_every_score(recent, now_text)
  if redis.call('ZCOUNT', recent, now_text, '+inf') == 0 then return now_text end
  local top = redis.call('ZREVRANGE', recent, 0, 0, 'WITHSCORES')[2]
  return string.format('%d', tonumber(top) + 1)
end


-- The key's new expiry (ms, as text) when a touch must move it, or false when
-- it stands: `expires` (the session's `e`) is kept while it lies between the
-- deadline and `late` ms after it, so most touches write no expiry at all.
local function expiry_due(expires, deadline, late)
  if not expires or expires < deadline or expires > deadline + late then
    return string.format('%d', deadline + late)
  end
  return false
end

-- Lists the session as seen now in the recency index and, when its expiry
-- moved (expire_text, from expiry_due), sets it on the key and on the index.
-- Returns the last-seen score.
local function mark_seen(key, recent, token, now_text, now_ms, expire_text, backstop, lateness)
  local seen = above_every_score(recent, now_text)
  redis.call('ZADD', recent, seen, token)
  if expire_text then
    redis.call('PEXPIREAT', key, expire_text)
    -- The index holds no data of its own: it outlives every session whose
    -- expiry was set with it, and lives on while sessions are touched.
    redis.call('PEXPIREAT', recent, string.format('%d', now_ms + backstop + lateness))
  end
  return seen
end
