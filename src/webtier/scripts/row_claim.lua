-- Claim the due rows of one shard of a row source for one worker.
--
-- KEYS[1] = due:   zset row key -> when its refresh is due (server ms)
-- KEYS[2] = delay: hash row key -> refresh delay (ms)
-- KEYS[3] = fill:  hash row key -> ticket of the load in flight
-- KEYS[4] = lease: zset row key -> when that load's lease runs out (server ms)
-- KEYS[5] = fail:  hash row key -> loads failed in a row
-- KEYS[6] = seq:   the last ticket handed out
-- ARGV[1] = the most rows to claim
-- ARGV[2] = lease (ms): how long the worker may hold them
-- ARGV[3] = claim only rows due at or before this server time (ms); '' for now
-- Returns {now, next due (ms, or -1 if nothing is scheduled), claimed count,
--          then key, ticket, due time for each claimed row,
--          then the key of each row dropped for having no delay}.
--
-- A claimed row's due time moves to the end of its lease, so no other worker
-- sees it due until the lease runs out: one refresh per due time, and a
-- worker that dies holding it delays it by one lease only. The ticket is the
-- fence: the refresh stores its copy only if the ticket is still the row's.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_end = string.format('%d', now + tonumber(ARGV[2]))

-- Loads whose lease ran out lose their tickets: they may no longer store.
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 1000)
for _, key in ipairs(expired) do
  redis.call('HDEL', KEYS[3], key)
  redis.call('ZREM', KEYS[4], key)
end

local upto = now
if ARGV[3] ~= '' then upto = math.min(now, tonumber(ARGV[3])) end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto, 'WITHSCORES', 'LIMIT', 0, ARGV[1])

local claimed, dropped = {}, {}
for i = 1, #due, 2 do
  local key, at = due[i], due[i + 1]
  local delay = tonumber(redis.call('HGET', KEYS[2], key))
  if not delay or delay <= 0 then
    -- Scheduled without a delay: unschedule it (the book's listing crashes here).
    redis.call('ZREM', KEYS[1], key)
    redis.call('HDEL', KEYS[2], key)
    redis.call('HDEL', KEYS[3], key)
    redis.call('ZREM', KEYS[4], key)
    redis.call('HDEL', KEYS[5], key)
    dropped[#dropped + 1] = key
  else
    local ticket = redis.call('INCR', KEYS[6])
    redis.call('HSET', KEYS[3], key, ticket)
    redis.call('ZADD', KEYS[4], lease_end, key)
    redis.call('ZADD', KEYS[1], lease_end, key)
    claimed[#claimed + 1] = key
    claimed[#claimed + 1] = ticket
    claimed[#claimed + 1] = at
  end
end

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local reply = {now, head[2] and tonumber(head[2]) or -1, #claimed / 3}
for _, v in ipairs(claimed) do reply[#reply + 1] = v end
for _, v in ipairs(dropped) do reply[#reply + 1] = v end
return reply
