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
--   mode 'f': a read-through load: the schedule is left alone
--   mode 'n': refresh_now: as 'f', and if refused, the copy is dropped: the
--             caller changed the row, and a newer load (which fenced this
--             one off) has yet to store, so the copy may be from before
--   data:     the row's JSON, or '' if the row does not exist
-- Returns, per row: 1 stored, 2 removed (no such row), 0 refused (fenced).
--
-- Whoever changes a row in the database and then invalidates it (or
-- unschedules it, or loads it again) takes the ticket away, so a load that
-- began before that change can never store its older copy over the newer.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local CHUNK = 1000
local n = #KEYS - 5

local function each(command, key, list, width)
  local step = CHUNK * width
  for from = 1, #list, step do
    redis.call(command, key, unpack(list, from, math.min(from + step - 1, #list)))
  end
end

local function hmget(key, fields)
  local values = {}
  for from = 1, #fields, CHUNK do
    local got = redis.call('HMGET', key, unpack(fields, from, math.min(from + CHUNK - 1, #fields)))
    for j = 1, #got do values[from + j - 1] = got[j] end
  end
  return values
end

local keys = {}
for i = 1, n do keys[i] = ARGV[3 + (i - 1) * 4] end
local tickets = hmget(KEYS[3], keys)
local delays = hmget(KEYS[2], keys)

local results, settled, reschedule, gone = {}, {}, {}, {}
for i = 1, n do
  local at = 3 + (i - 1) * 4
  local key, ticket, mode, data = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local row = KEYS[5 + i]
  local delay = tonumber(delays[i])
  if tickets[i] ~= ticket then
    if mode == 'n' then redis.call('DEL', row) end
    results[i] = 0
  else
    settled[#settled + 1] = key
    if data == '' then
      if delay then
        -- Deleted in the database: nothing left to cache or to refresh.
        redis.call('DEL', row)
        gone[#gone + 1] = key
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
          reschedule[#reschedule + 1] = string.format('%d', now + delay)
          reschedule[#reschedule + 1] = key
        end
      else
        redis.call('SET', row, data, 'PX', ARGV[1])
      end
      results[i] = 1
    end
  end
end
each('HDEL', KEYS[3], settled, 1)
each('ZREM', KEYS[4], settled, 1)
each('HDEL', KEYS[5], settled, 1)
each('ZADD', KEYS[1], reschedule, 2)
each('ZREM', KEYS[1], gone, 1)
each('HDEL', KEYS[2], gone, 1)
return results
