-- Give back rows whose load failed (a database error), so they are retried
-- with backoff; their cached copies stay as they are.
--
-- KEYS[1] = due:   zset row key -> when its refresh is due (server ms)
-- KEYS[2] = fill:  hash row key -> ticket of the load in flight
-- KEYS[3] = lease: zset row key -> when that load's lease runs out
-- KEYS[4] = fail:  hash row key -> loads failed in a row
-- ARGV[1] = first backoff (ms), doubled per failure in a row
-- ARGV[2] = longest backoff (ms)
-- ARGV[3] = ttl (ms) of the failure counts: longer than the longest backoff
-- ARGV[4 + 2(i-1)], ARGV[5 + 2(i-1)] = row i: key, ticket
-- Returns the number of rows given back (others had lost their ticket).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local first, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local released = 0
for i = 4, #ARGV, 2 do
  local key, ticket = ARGV[i], ARGV[i + 1]
  if redis.call('HGET', KEYS[2], key) == ticket then
    redis.call('HDEL', KEYS[2], key)
    redis.call('ZREM', KEYS[3], key)
    if redis.call('ZSCORE', KEYS[1], key) then
      -- Failures are counted for scheduled rows only, so the hash stays bounded.
      -- The counts expire once no row of the shard has failed for their
      -- ttl: a row failing now fails again within the longest backoff.
      local failures = redis.call('HINCRBY', KEYS[4], key, 1)
      redis.call('PEXPIRE', KEYS[4], ARGV[3])
      local wait = math.min(cap, first * 2 ^ math.min(failures - 1, 30))
      redis.call('ZADD', KEYS[1], string.format('%d', now + wait), key)
    end
    released = released + 1
  end
end
return released
