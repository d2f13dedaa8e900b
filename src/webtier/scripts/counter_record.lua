-- Add counts to the current slice of every precision of some counters, all in
-- one shard (so one slot). Called with one entry by record(), with many by the
-- batched recorder.
--
-- KEYS[1]                 = the shard's index: zset name -> server ms of its last new slice
-- KEYS[1 + (e-1)*P + i]   = hash of precision i of entry e: slice start -> count
-- ARGV[1]                 = P, the number of precisions
-- ARGV[2]                 = index horizon (ms): no counter's data outlives this after its last new slice
-- ARGV[3 + 3*(i-1) ..]    = precision i: seconds, samples kept, key ttl (ms)
-- then per entry e        = name, count, slice start at each precision (P values)
--
-- Memory stays bounded with no cleaner running: a hash never holds more than
-- its samples (the oldest slice goes when a new one comes), a hash expires
-- ttl after its newest slice was created, and the index drops names whose
-- data has all expired. Work beyond HINCRBY happens only when a slice is new.

local P = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local first_entry = 3 + 3 * P
local per_entry = 2 + P

-- Keep the newest `keep` fields (slice starts) of a hash that just grew past it.
local function trim(key, keep, likely_oldest)
  -- Under steady traffic exactly one slice falls out: the one `keep` slices back.
  redis.call('HDEL', key, likely_oldest)
  local extra = redis.call('HLEN', key) - keep
  if extra <= 0 then return end
  local fields = redis.call('HKEYS', key)
  table.sort(fields, function(a, b) return tonumber(a) < tonumber(b) end)
  for j = 1, extra do redis.call('HDEL', key, fields[j]) end
end

local registered = {}
for e = 0, (#ARGV - first_entry + 1) / per_entry - 1 do
  local at = first_entry + e * per_entry
  local name, count = ARGV[at], ARGV[at + 1]
  local amount = tonumber(count)
  local new_slice = false
  for i = 1, P do
    local key = KEYS[1 + e * P + i]
    local slice = ARGV[at + 1 + i]
    -- A field that did not exist comes back equal to the amount added.
    if redis.call('HINCRBY', key, slice, count) == amount then
      new_slice = true
      local conf = 3 + 3 * (i - 1)
      redis.call('PEXPIRE', key, ARGV[conf + 2])
      local keep = tonumber(ARGV[conf + 1])
      if redis.call('HLEN', key) > keep then
        trim(key, keep, tonumber(slice) - keep * tonumber(ARGV[conf]))
      end
    end
  end
  if new_slice then registered[#registered + 1] = name end
end

if #registered > 0 then
  -- Server time, so the index ages on the same clock as the keys' TTLs.
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, name in ipairs(registered) do redis.call('ZADD', KEYS[1], ms, name) end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', ms - horizon))
  redis.call('PEXPIRE', KEYS[1], horizon)
end
return #registered
