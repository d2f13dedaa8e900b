-- Set data fields of one live session, within its size limits, atomically.
--
-- KEYS[1] = the session (hash; data values are the fields d<name>, JSON)
-- ARGV[1] = most data fields, ARGV[2] = most bytes of all data values
-- ARGV[3 ..] = name and JSON value pairs (names without the 'd')
-- Returns {1} when written, {0} when there is no session, {-1, fields,
-- bytes} when the result would exceed a limit (nothing written).
--
-- Fields are set one by one (HSET), so parallel requests that set different
-- fields never undo each other's writes (Flask-Session's lost update).

local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return {0} end
local sizes = {}
local fields = redis.call('HGETALL', key)
for i = 1, #fields, 2 do
  local name = fields[i]
  if #name > 1 and string.byte(name) == 100 then sizes[name] = #fields[i + 1] end -- 'd'
end
for i = 3, #ARGV, 2 do sizes['d' .. ARGV[i]] = #ARGV[i + 1] end
local count, bytes = 0, 0
for _, size in pairs(sizes) do
  count = count + 1
  bytes = bytes + size
end
if count > tonumber(ARGV[1]) or bytes > tonumber(ARGV[2]) then return {-1, count, bytes} end
for i = 3, #ARGV, 2 do redis.call('HSET', key, 'd' .. ARGV[i], ARGV[i + 1]) end
return {1}
