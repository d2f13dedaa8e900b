-- Set data fields of one live session, within its size limits, atomically.
--
-- KEYS[1] = the session (hash; data values are the fields d<name>, JSON)
-- ARGV[1] = most data fields, ARGV[2] = most bytes of all data values
-- ARGV[3 ..] = name and JSON value pairs (names without the 'd')
-- Returns {1} when written, {0} when there is no session, {-1, fields,
-- bytes} when the result would exceed a limit (nothing written).
--
local key = KEYS[1]
-- The fields this call sets: the limits count them at their new size, so
-- the pass below skips their stored one (no table of every field's size: a
-- table grows by rehashing, which cost more than the reading).
local written = {}
for i = 3, #ARGV, 2 do written['d' .. ARGV[i]] = true end
-- A session always holds its own fields (c, i): no fields, no session.
local fields = redis.call('HGETALL', key)
if #fields == 0 then return {0} end
local count, bytes = 0, 0
for i = 1, #fields, 2 do
  local name = fields[i]
  if #name > 1 and string.byte(name) == 100 and not written[name] then -- 'd'
    count = count + 1
    bytes = bytes + #fields[i + 1]
  end
end
for i = 3, #ARGV, 2 do
  count = count + 1
  bytes = bytes + #ARGV[i + 1]
end
if count > ARGV[1] + 0 or bytes > ARGV[2] + 0 then return {-1, count, bytes} end
local set = {}
for i = 3, #ARGV, 2 do
  set[#set + 1] = 'd' .. ARGV[i]
  set[#set + 1] = ARGV[i + 1]
end
-- One HSET of only the named fields: parallel requests that set different
-- fields never undo each other's writes (Flask-Session's lost update).
redis.call('HSET', key, unpack(set))
return {1}
