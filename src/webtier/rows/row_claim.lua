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
-- ARGV[4] = ttl (ms) of the shard's bookkeeping of loads (fill, lease, seq):
--           longer than any lease
-- ARGV[5] = this call's nonce: random text ending every ticket it hands out
-- Returns {now, next due (ms, or -1 if nothing is scheduled), claimed count,
--          then key, ticket, due time for each claimed row,
--          then the key of each row dropped for having no delay}.
--
-- A claimed row's due time moves to the end of its lease, so no other worker
-- sees it due until the lease runs out: one refresh per due time, and a
-- worker that dies holding it delays it by one lease only. The ticket is the
-- fence: the refresh stores its copy only if the ticket is still the row's.
-- Commands take many rows at once (in chunks: unpack() is bounded by Lua's
-- stack), which is most of a refresh's cost on the server.
--
-- Tickets only grow, so a ticket is never handed out twice. The sequence
-- expires once no load has begun for its ttl (row_fill.lua keeps it alive
-- too), and a restart of a Redis without persistence loses it; a missing
-- sequence starts again at the server's time in µs. That is above every
-- ticket handed out before: a sequence started at the clock stays behind
-- it, as a ticket costs the server far more than a µs (a claim and its
-- store about 36 µs a row, docs/rows.md; a read-through a script call), so
-- it runs ahead of the clock by one script's tickets at most (`batch`,
-- 10 ms at most); the clock has moved on by the ttl (a day at least) since
-- the last ticket; and a sequence counted from 1, as before, is far below.
-- A failover may still hand a number out again: a replica promoted before
-- the last increments reached it counts from behind them. So a ticket ends
-- in the caller's random nonce: the same number from two calls is two
-- tickets, and a load from before the failover cannot store.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_end = string.format('%d', now + tonumber(ARGV[2]))
local CHUNK = 1000

-- Run `command key <args...>` over `list`, `width` list items per row.
local function each(command, key, list, width)
  local step = CHUNK * width
  for from = 1, #list, step do
    redis.call(command, key, unpack(list, from, math.min(from + step - 1, #list)))
  end
end

-- Loads whose lease ran out lose their tickets: they may no longer store.
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 1000)
each('HDEL', KEYS[3], expired, 1)
each('ZREM', KEYS[4], expired, 1)

local upto = now
if ARGV[3] ~= '' then upto = math.min(now, tonumber(ARGV[3])) end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto, 'WITHSCORES', 'LIMIT', 0, ARGV[1])

local keys = {}
for i = 1, #due, 2 do keys[#keys + 1] = due[i] end
local delays = {}
for from = 1, #keys, CHUNK do
  local got = redis.call('HMGET', KEYS[2], unpack(keys, from, math.min(from + CHUNK - 1, #keys)))
  for j = 1, #got do delays[from + j - 1] = tonumber(got[j]) end
end

local reply, dropped, fills, leases = {now, -1, 0}, {}, {}, {}
local ticket = 0
for i, key in ipairs(keys) do
  local delay = delays[i]
  if not delay or delay <= 0 then
    dropped[#dropped + 1] = key  -- scheduled without a delay: the book's listing crashes here
  else
    if ticket == 0 then
      -- Tickets for every row claimed here, in one increment.
      local last = redis.call('INCRBY', KEYS[6], #keys)
      if last == #keys then  -- the sequence was missing
        last = tonumber(t[1]) * 1000000 + tonumber(t[2]) + #keys
        redis.call('SET', KEYS[6], string.format('%d', last), 'PX', ARGV[4])
      else
        redis.call('PEXPIRE', KEYS[6], ARGV[4])
      end
      ticket = last - #keys
    end
    ticket = ticket + 1
    fills[#fills + 1] = key
    fills[#fills + 1] = string.format('%d', ticket) .. ARGV[5]
    leases[#leases + 1] = lease_end
    leases[#leases + 1] = key
    reply[#reply + 1] = key
    reply[#reply + 1] = fills[#fills]
    reply[#reply + 1] = due[2 * i]
  end
end
each('HSET', KEYS[3], fills, 2)
each('ZADD', KEYS[4], leases, 2)
each('ZADD', KEYS[1], leases, 2)
if #fills > 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
if #dropped > 0 then
  each('ZREM', KEYS[1], dropped, 1)
  each('HDEL', KEYS[2], dropped, 1)
  each('HDEL', KEYS[3], dropped, 1)
  each('ZREM', KEYS[4], dropped, 1)
  each('HDEL', KEYS[5], dropped, 1)
end
reply[3] = #fills / 2

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] then reply[2] = tonumber(head[2]) end
for _, key in ipairs(dropped) do reply[#reply + 1] = key end
return reply
