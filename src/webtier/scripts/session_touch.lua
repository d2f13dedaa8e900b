-- Create or touch one session (the book's update_token), atomically, in the
-- slot of its shard.
--
-- KEYS[1] = the session: a hash whose one-letter fields are the session's own,
--           u = user, c = created (server ms), i = public session id,
--           n = item views so far, m = viewed items held; and whose longer
--           fields are a letter and a name: v<item> = the number of its
--           latest view, k<item> = cart count, d<name> = data value (JSON)
-- KEYS[2] = the shard's recency index: zset token -> last seen (server µs)
-- ARGV[1] = the token (member of KEYS[2])
-- ARGV[2] = mode: 'new' (create; refuse a token in use), 'live' (touch a live
--           session only: strict mode), 'any' (create when missing: the book)
-- ARGV[3] = public id of a session created here
-- ARGV[4] = user to record, or '' to leave the user as it is
-- ARGV[5] = item viewed, or ''
-- ARGV[6] = viewed items kept: the newest `keep`; between trims a session
--           holds up to `keep` + SLACK, and readers take the newest `keep`
-- ARGV[7] = idle timeout ms (0: off)
-- ARGV[8] = absolute timeout ms (0: off)
-- ARGV[9] = backstop ms: the key expires this long after the touch at most
-- Returns {1, user or '', last seen µs} when touched (or created),
-- {0} when there is no such session (or, for 'new', the token is in use),
-- {-1, user} when, in 'live' mode, the session belongs to another user
-- (nothing written).
--
-- The new last-seen score is the server's time, but always above every score
-- of the shard: a touched session is the newest of its shard whatever the
-- clocks do, so a cleaner that removes only entries up to a score it read
-- earlier can never remove a session touched since (session_clean.lua).

local key, recent, token, mode = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local user, item, keep = ARGV[4], ARGV[5], tonumber(ARGV[6])
local idle, absolute, backstop = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])

local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now_ms = math.floor(now_us / 1000)

-- Dropping the least recently viewed item needs a pass over the session's
-- fields, the dearest part of a touch: a full session takes SLACK more items
-- and then drops SLACK + 1 in one pass, so a pass serves SLACK + 1 views.
local SLACK = 2

local field = (item ~= '' and keep > 0) and ('v' .. item) or false
local own = redis.call('HMGET', key, 'c', 'u', 'n', 'm', field or 'n')
local created, current = tonumber(own[1]), own[2]
local views, held = tonumber(own[3]) or 0, tonumber(own[4]) or 0
if created then
  if mode == 'new' then return {0} end
  -- Strict mode refuses to switch users without a login (which rotates the
  -- token); the book's update_token ('any') records whatever user it is given.
  if user ~= '' and current and current ~= user and mode == 'live' then return {-1, current} end
  if user == '' then user = current or '' end
elseif mode == 'live' then
  -- Expired or cleaned: forget any index entry left behind.
  redis.call('ZREM', recent, token)
  return {0}
else
  created = now_ms
  redis.call('HSET', key, 'c', created, 'i', ARGV[3])
end

local deadline = now_ms + backstop
if idle > 0 then deadline = math.min(deadline, now_ms + idle) end
if absolute > 0 then deadline = math.min(deadline, created + absolute) end
if deadline <= now_ms then
  redis.call('DEL', key)
  redis.call('ZREM', recent, token)
  return {0}
end

if user ~= '' and user ~= current then redis.call('HSET', key, 'u', user) end

if field then
  local number = views + 1
  if own[5] then
    -- Held already: only renumbered, it becomes the newest.
    redis.call('HSET', key, 'n', number, field, number)
  elseif held < keep + SLACK then
    redis.call('HSET', key, 'n', number, field, number, 'm', held + 1)
  else
    -- Full: keep the newest `keep` with this one. One pass picks the
    -- `excess` oldest (more than SLACK + 1 if `keep` was lowered since),
    -- by insertion into a short list. View numbers are integers without
    -- leading zeros, so they compare as (length, text) with no conversion.
    local fields = redis.call('HGETALL', key)
    local excess = held + 1 - keep
    local byte, names, widths, numbers, found = string.byte, {}, {}, {}, 0
    local function older(w, n, at) -- is (w, n) older than the entry at `at`?
      return w < widths[at] or (w == widths[at] and n < numbers[at])
    end
    for i = 1, #fields, 2 do
      local name = fields[i]
      if #name > 1 and byte(name) == 118 then -- 'v'
        local n = fields[i + 1]
        local w = #n
        local at = found < excess and found + 1 or excess
        if at > found or older(w, n, at) then
          while at > 1 and older(w, n, at - 1) do
            names[at], widths[at], numbers[at] = names[at - 1], widths[at - 1], numbers[at - 1]
            at = at - 1
          end
          names[at], widths[at], numbers[at] = name, w, n
          if found < excess then found = found + 1 end
        end
      end
    end
    if found > 0 then redis.call('HDEL', key, unpack(names)) end
    redis.call('HSET', key, 'n', number, field, number, 'm', held + 1 - found)
  end
end

local seen = now_us
local top = redis.call('ZREVRANGE', recent, 0, 0, 'WITHSCORES')[2]
if top and tonumber(top) >= seen then seen = tonumber(top) + 1 end
local seen_text = string.format('%.0f', seen)
redis.call('ZADD', recent, seen_text, token)
redis.call('PEXPIREAT', key, string.format('%.0f', deadline))
-- The index holds no data of its own; it lives while sessions are touched.
redis.call('PEXPIRE', recent, backstop)
return {1, user, seen_text}
