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
-- ARGV[4] = ttl (ms) of the shard's bookkeeping of loads (fill, lease, seq):
--           longer than any lease
-- ARGV[5] = this call's nonce: random text ending the ticket (a failover
--           may hand a number out again; row_claim.lua says why)
-- Returns {'hit', copy} | {'wait', ms left on the live load's lease} | {'load', ticket}.
--
-- Memory stays bounded with no worker running: loads whose lease ran out
-- lose their tickets here too (as in row_claim.lua), a few more than this
-- call adds, so readers that died mid-load leave nothing behind; and the
-- bookkeeping expires once no load has begun for its ttl.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = ARGV[1]
if ARGV[3] == 'miss' then
  local copy = redis.call('GET', KEYS[4])
  if copy then return {'hit', copy} end
  local until_ms = tonumber(redis.call('ZSCORE', KEYS[2], key))
  if until_ms and until_ms > now then return {'wait', until_ms - now} end
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 16)
if #expired > 0 then
  redis.call('HDEL', KEYS[1], unpack(expired))
  redis.call('ZREM', KEYS[2], unpack(expired))
end
-- Tickets only grow: a missing sequence (new, expired, or lost in a restart)
-- starts again at the server's time in µs, above every ticket handed out
-- before, as no shard hands out a ticket a µs (row_claim.lua says why).
local ticket = redis.call('INCR', KEYS[3])
if ticket == 1 then
  ticket = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('SET', KEYS[3], string.format('%d', ticket), 'PX', ARGV[4])
else
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
ticket = string.format('%d', ticket) .. ARGV[5]
redis.call('HSET', KEYS[1], key, ticket)
redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[2])), key)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {'load', ticket}
