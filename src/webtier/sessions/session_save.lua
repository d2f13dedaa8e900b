-- Save a framework's session (Django's SessionStore, Flask's session
-- interface, a starsessions store) in one script: create-only or
-- update-only, only the data keys the request changed or removed, the
-- session's own expiry, and its place in the recency index.
--
-- KEYS[1] = the session's hash (fields: session_touch.lua; the framework's
--           data in d<name> (JSON) or its opaque blob in b, its own idle
--           expiry in x, ms)
-- KEYS[2] = the shard's recency index: zset id -> last seen (server µs)
-- ARGV[1] = the id (member of KEYS[2])
-- ARGV[2] = 'create' (fails when the id exists) or 'update' (fails when no
--           live session has it: deleted or expired meanwhile)
-- ARGV[3] = the session's own idle expiry, ms (0: as it was, else the tier's)
-- ARGV[4] = the tier's idle timeout ms (0: off); ARGV[5] = absolute ms (0: off)
-- ARGV[6] = backstop ms; ARGV[7] = how late the backstop may be set (ms)
-- ARGV[8] = most data fields; ARGV[9] = most bytes of data and blob
-- ARGV[10] = the public id of a created session
-- ARGV[11] = the session's user ('' anonymous), which the caller listed in
--            the user's index first
-- ARGV[12] = '1': set the blob to ARGV[13]; '0': leave it
-- ARGV[14] = n, the number of data names removed, ARGV[15 .. 14 + n] them;
-- then name and JSON value pairs to set (names without the 'd').
-- Returns {1} when saved, {0} when the mode's condition failed (nothing
-- written), {-1, fields, bytes} when the result would exceed a limit.
--
-- Atomic, because the check (exists or not) must hold for the write: an
-- update that finds the session must not resurrect one a logout deletes
-- between a check and a write, and two creates of one id must not both win.
-- Only the named keys are written, so two requests that change different
-- keys of one session both keep their change (Flask-Session's lost update).

local key, recent, id, mode = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local own = ARGV[3] + 0
local idle, absolute, backstop, lateness = ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0

local now_text, now_ms = server_now()
local removed = ARGV[14] + 0
local first_pair = 15 + removed
local blob = ARGV[12] == '1'
-- The data fields this save removes or sets: the limits count them at their
-- new size, so the pass below skips their stored one. A save changes a key
-- or two: this table is the pass's only one (a table of every field's size
-- cost more than the reading: a table grows by rehashing, in Redis's Lua).
local written = {}
for i = 15, first_pair - 1 do written['d' .. ARGV[i]] = true end
for i = first_pair, #ARGV, 2 do written['d' .. ARGV[i]] = true end

local fields = redis.call('HGETALL', key)
local created, stored_own, stored_user = false, false, false
local count, bytes = 0, 0
for i = 1, #fields, 2 do
  local name = fields[i]
  if #name > 1 then
    if string.byte(name) == 100 and not written[name] then -- 'd', kept as stored
      count = count + 1
      bytes = bytes + #fields[i + 1]
    end
  elseif name == 'c' then
    created = fields[i + 1] + 0
  elseif name == 'x' then
    stored_own = fields[i + 1] + 0
  elseif name == 'u' then
    stored_user = fields[i + 1]
  elseif name == 'b' and not blob then
    bytes = bytes + #fields[i + 1]
  end
end
if own == 0 and stored_own then own = stored_own end
if own > 0 then idle = own_idle(own, idle) end
if mode == 'create' then
  if #fields > 0 then return {0} end
  created = now_ms
elseif not created then
  return {0}
elseif not touch_deadline(key, recent, id, now_ms, created, idle, absolute, backstop, lateness) then
  return {0}
end

for i = first_pair, #ARGV, 2 do
  count = count + 1
  bytes = bytes + #ARGV[i + 1]
end
if blob then bytes = bytes + #ARGV[13] end
if count > ARGV[8] + 0 or bytes > ARGV[9] + 0 then return {-1, count, bytes} end

-- One HDEL and one HSET for every field the save changes: each redis.call
-- costs about as much as the reading and checking above. A field that holds
-- its value already (the user, the own expiry) is not written again.
local unset, set = {}, {}
for i = 15, first_pair - 1 do unset[#unset + 1] = 'd' .. ARGV[i] end
if ARGV[11] == '' and stored_user then unset[#unset + 1] = 'u' end
if mode == 'create' then set = {'c', string.format('%d', now_ms), 'i', ARGV[10]} end
for i = first_pair, #ARGV, 2 do
  set[#set + 1] = 'd' .. ARGV[i]
  set[#set + 1] = ARGV[i + 1]
end
if blob then set[#set + 1] = 'b'; set[#set + 1] = ARGV[13] end
if ARGV[11] ~= '' and ARGV[11] ~= stored_user then set[#set + 1] = 'u'; set[#set + 1] = ARGV[11] end
local deadline, late = session_deadline(now_ms, created, idle, absolute, backstop, lateness)
local expire_text = string.format('%d', deadline + late)
set[#set + 1] = 'e'
set[#set + 1] = expire_text
if own > 0 and own ~= stored_own then set[#set + 1] = 'x'; set[#set + 1] = string.format('%d', own) end
-- In slices: unpack puts every element on Lua's stack, which is bounded.
for first = 1, #unset, 1000 do
  redis.call('HDEL', key, unpack(unset, first, math.min(first + 999, #unset)))
end
for first = 1, #set, 1000 do
  redis.call('HSET', key, unpack(set, first, math.min(first + 999, #set)))
end
mark_seen(key, recent, id, now_text, now_ms, expire_text, backstop, lateness)
return {1}
