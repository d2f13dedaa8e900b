-- Store freshly loaded rows of one shard, each only if its load still holds
-- the row's ticket (the fence).
--
-- KEYS[1] = due:   zset row key -> when its refresh is due (server ms)
-- KEYS[2] = delay: hash row key -> refresh delay (ms)
-- KEYS[3] = fill:  hash row key -> ticket of the load in flight
-- KEYS[4] = lease: zset row key -> when that load's lease runs out
-- KEYS[5] = fail:  hash row key -> loads failed in a row
-- KEYS[5 + i]      = the cached copy of row i (a string)
-- ARGV[1] = ttl (ms) of a copy of a row that is not scheduled
-- ARGV[2] = how long (ms) to remember that a row does not exist; 0: not at all
-- ARGV[3 + 4(i-1)] .. ARGV[6 + 4(i-1)] = row i: key, ticket, mode, data
--   mode 'r': a scheduled refresh: the next one is due in the row's delay
--   mode 'f': a read-through or explicit load: the schedule is left alone
--   data:     the row's JSON, or '' if the row does not exist
-- Returns, per row: 1 stored, 2 removed (no such row), 0 refused (fenced).
--
-- Whoever changes a row in the database and then invalidates it (or
-- unschedules it, or loads it again) takes the ticket away, so a load that
-- began before that change can never store its older copy over the newer.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local results = {}
for i = 1, #KEYS - 5 do
  local at = 3 + (i - 1) * 4
  local key, ticket, mode, data = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local row = KEYS[5 + i]
  if redis.call('HGET', KEYS[3], key) ~= ticket then
    results[i] = 0
  else
    redis.call('HDEL', KEYS[3], key)
    redis.call('ZREM', KEYS[4], key)
    redis.call('HDEL', KEYS[5], key)
    local delay = tonumber(redis.call('HGET', KEYS[2], key))
    if data == '' then
      if delay then
        -- Deleted in the database: nothing left to cache or to refresh.
        redis.call('DEL', row)
        redis.call('ZREM', KEYS[1], key)
        redis.call('HDEL', KEYS[2], key)
      elseif tonumber(ARGV[2]) > 0 then
        redis.call('SET', row, '', 'PX', ARGV[2])
      else
        redis.call('DEL', row)
      end
      results[i] = 2
    else
      if delay then
        redis.call('SET', row, data)  -- scheduled rows live until unscheduled
        if mode == 'r' then
          redis.call('ZADD', KEYS[1], string.format('%d', now + delay), key)
        end
      else
        redis.call('SET', row, data, 'PX', ARGV[1])
      end
      results[i] = 1
    end
  end
end
return results
