-- Schedule one row for refreshes every `delay` ms, or unschedule it.
--
-- KEYS[1] = due:   zset row key -> when its refresh is due (server ms)
-- KEYS[2] = delay: hash row key -> refresh delay (ms)
-- KEYS[3] = fill:  hash row key -> ticket of the load in flight
-- KEYS[4] = lease: zset row key -> when that load's lease runs out
-- KEYS[5] = fail:  hash row key -> loads failed in a row
-- KEYS[6] = the cached copy of the row
-- ARGV[1] = the row key
-- ARGV[2] = delay (ms); 0 unschedules the row and drops its copy (the book's rule)
-- Returns 1 if the row is newly scheduled, else 0.
--
-- A row already scheduled keeps its next due time: the new delay applies
-- from its next refresh, so scheduling again never makes a row due twice.

local key, delay = ARGV[1], tonumber(ARGV[2])
if delay <= 0 then
  redis.call('ZREM', KEYS[1], key)
  redis.call('HDEL', KEYS[2], key)
  redis.call('HDEL', KEYS[3], key)
  redis.call('ZREM', KEYS[4], key)
  redis.call('HDEL', KEYS[5], key)
  redis.call('DEL', KEYS[6])
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], key, ARGV[2])
redis.call('PERSIST', KEYS[6])  -- a read-through copy now lives while scheduled
return redis.call('ZADD', KEYS[1], 'NX', string.format('%d', now), key)
