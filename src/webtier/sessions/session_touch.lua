-- Create or touch one session (the book's update_token), atomically, in the
-- slot of its shard.
--
-- KEYS[1] = the session: a hash whose one-letter fields are the session's own,
--           u = user, c = created (server ms), i = public session id,
--           n = item views so far, m = viewed items held, e = when the key
--           expires (server ms, as last set); and whose longer
--           fields are a letter and a name: v<item> = the number of its
--           latest view, k<item> = cart count, d<name> = data value (JSON)
-- KEYS[2] = the shard's recency index: zset token -> last seen (server µs)
-- KEYS[3] = (optional, single server only: another slot) the item view
--           ranking, zset item -> views: a touch that finds the session live
--           counts the item's view there, so that a view is never counted
--           for a session that does not exist
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
-- ARGV[9] = backstop ms: the key expires this long after the touch, or up to
--           ARGV[10] ms later (see below)
-- Returns {1, user or '', last seen µs} when touched (or created),
-- {0} when there is no such session (or, for 'new', the token is in use),
-- {-1, user} when, in 'live' mode, the session belongs to another user
-- (nothing written).
--
-- The new last-seen score is the server's time, but always above every score
-- of the shard (above_every_score, session_prelude.lua, as for the deadline).
--
-- Every call from a script costs the server about as much as the rest of a
-- touch together, and number formatting with %g (what Lua's tostring does)
-- several times an integer's %d: this script makes five calls on most
-- touches and writes numbers with %d.
--
-- Expiry: the key's deadline is the touch plus the backstop, or sooner when
-- the idle or the absolute timeout ends first. Those two are exact: the key
-- is set to expire at that very time. The backstop only bounds memory, so it
-- is kept lazily: it is set ARGV[10] ms (a 64th of the backstop) late, and
-- not written again (key and index: two calls) until a touch finds it due to
-- move past that. The key never expires before its deadline, and at most
-- ARGV[10] ms after it.

local key, recent, token, mode = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
-- Text becomes a number by arithmetic (`text + 0`): one parse, where
-- tonumber() parses twice in Redis's Lua 5.1.
local user, item, keep = ARGV[4], ARGV[5], ARGV[6] + 0
local idle, absolute, backstop, lateness = ARGV[7] + 0, ARGV[8] + 0, ARGV[9] + 0, ARGV[10] + 0
local format = string.format

local now_text, now_ms = server_now()

-- Dropping the least recently viewed item needs a pass over the session's
-- fields, the dearest part of a touch: a full session takes SLACK more items
-- and then drops SLACK + 1 in one pass, so a pass serves SLACK + 1 views.
local SLACK = 3

local field = (item ~= '' and keep > 0) and ('v' .. item) or false
local own = redis.call('HMGET', key, 'c', 'u', 'n', 'm', 'e', field or 'n', 'x')
local created, current = own[1] and own[1] + 0, own[2]
local views, held = own[3] and own[3] + 0 or 0, own[4] and own[4] + 0 or 0
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
  redis.call('HSET', key, 'c', format('%d', created), 'i', ARGV[3])
  -- Redis expires sessions, not their index entries: each new session drops
  -- up to 8 entries last seen longer ago than a session can live unseen, so
  -- the index stays bounded with no cleaner running.
  local age = (idle > 0 and idle < backstop) and idle or backstop
  local gone = redis.call('ZRANGEBYSCORE', recent, '-inf', format('(%d', (now_ms - age) * 1000),
    'LIMIT', 0, 8)
  if #gone > 0 then redis.call('ZREM', recent, unpack(gone)) end
end

if own[7] then idle = own_idle(own[7] + 0, idle) end -- saved by a framework's store
local deadline, late =
  touch_deadline(key, recent, token, now_ms, created, idle, absolute, backstop, lateness)
if not deadline then return {0} end

-- What the session's hash gets, in one HSET at the end.
local writes, count = {}, 0
local function put(name, value)
  writes[count + 1], writes[count + 2] = name, value
  count = count + 2
end
if user ~= '' and user ~= current then put('u', user) end

local expire_text = expiry_due(own[5] and own[5] + 0, deadline, late)
if expire_text then put('e', expire_text) end

if field then
  local number = format('%d', views + 1)
  put('n', number)
  put(field, number)
  if own[6] then
    -- Held already: only renumbered, it becomes the newest.
  elseif held < keep + SLACK then
    put('m', format('%d', held + 1))
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
    put('m', format('%d', held + 1 - found))
  end
end
if count > 0 then redis.call('HSET', key, unpack(writes)) end

if KEYS[3] and item ~= '' then redis.call('ZINCRBY', KEYS[3], 1, item) end
local seen = mark_seen(key, recent, token, now_text, now_ms, expire_text, backstop, lateness)
return {1, user, seen}
