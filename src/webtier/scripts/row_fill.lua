-- Take the load of one row that is not cached (read-through), or of any row
-- (refresh_now), so that concurrent readers wait for one load.
--
-- KEYS[1] = fill:  hash row key -> ticket of the load in flight
-- KEYS[2] = lease: zset row key -> when that load's lease runs out (server ms)
-- KEYS[3] = seq:   the last ticket handed out
-- KEYS[4] = the cached copy of the row
-- ARGV[1] = the row key
-- ARGV[2] = lease (ms) of the load
-- ARGV[3] = 'miss': take the load only if the row is not cached and no live
--           load holds it; 'force': take it anyway (the row changed)
-- Returns {'hit', copy} | {'wait', ms left on the live load's lease} | {'load', ticket}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = ARGV[1]
if ARGV[3] == 'miss' then
  local copy = redis.call('GET', KEYS[4])
  if copy then return {'hit', copy} end
  local until_ms = tonumber(redis.call('ZSCORE', KEYS[2], key))
  if until_ms and until_ms > now then return {'wait', until_ms - now} end
end
local ticket = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], key, ticket)
redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[2])), key)
return {'load', ticket}
