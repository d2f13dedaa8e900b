-- The row changed in the database: drop its cached copy, fence off any load
-- in flight, and make a scheduled row due now.
--
-- KEYS[1] = due:   zset row key -> when its refresh is due (server ms)
-- KEYS[2] = fill:  hash row key -> ticket of the load in flight
-- KEYS[3] = lease: zset row key -> when that load's lease runs out
-- KEYS[4] = the cached copy of the row
-- ARGV[1] = the row key
-- Returns 1 if a copy was dropped, else 0.

local key = ARGV[1]
redis.call('HDEL', KEYS[2], key)
redis.call('ZREM', KEYS[3], key)
if redis.call('ZSCORE', KEYS[1], key) then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now), key)
end
return redis.call('DEL', KEYS[4])
