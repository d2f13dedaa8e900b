-- Add counts to the current slice of every precision of some counters, all in
-- one shard (so one slot). Called with one entry by record(), with many by the
-- batched recorder.
--
-- KEYS[1]                 = the shard's index: zset name -> server ms of its last new slice
-- KEYS[1 + (e-1)*P + i]   = hash of precision i of entry e: slice start -> count
-- ARGV[1]                 = the settings, "<horizon ms> <seconds>:<samples>:<ttl ms> ..."
--                           one triple per precision; read only when a slice is new
-- then per entry e        = name, count, slice start at each precision (P values)
--
-- P and the number of entries E follow from the sizes: #KEYS = 1 + E*P and
-- #ARGV = 1 + E*(2 + P).
--
-- Memory stays bounded with no cleaner running: a hash never holds more than
-- its samples (the oldest slice goes when a new one comes), a hash expires
-- ttl after its newest slice was created, and the index drops names whose
-- data has all expired. Only HINCRBY runs on every call: the rest happens
-- when a slice is new, about once per slice and counter.

local entries = (#ARGV - #KEYS) / 2
local P = (#KEYS - 1) / entries

local settings  -- parsed on first need: {horizon, {seconds, samples, ttl}...}
local function setting()
  if not settings then
    local horizon, rest = string.match(ARGV[1], '^(%d+) (.*)$')
    settings = {tonumber(horizon)}
    for seconds, samples, ttl in string.gmatch(rest, '(%d+):(%d+):(%d+)') do
      settings[#settings + 1] = {tonumber(seconds), tonumber(samples), ttl}
    end
  end
  return settings
end

-- Keep the newest `keep` slices of a hash that just grew past it.
local function trim(key, keep, slice, seconds)
  -- Under steady traffic exactly one slice falls out: the one `keep` back.
  redis.call('HDEL', key, string.format('%d', slice - keep * seconds))
  local extra = redis.call('HLEN', key) - keep
  if extra <= 0 then return end
  local fields = redis.call('HKEYS', key)
  table.sort(fields, function(a, b) return tonumber(a) < tonumber(b) end)
  for j = 1, extra do redis.call('HDEL', key, fields[j]) end
end

local registered = {}
for e = 0, entries - 1 do
  local at = 2 + e * (2 + P)
  local count = ARGV[at + 1]
  local amount = tonumber(count)
  local new_slice = false
  for i = 1, P do
    local key, slice = KEYS[1 + e * P + i], ARGV[at + 1 + i]
    -- A field that did not exist comes back equal to the amount added.
    if redis.call('HINCRBY', key, slice, count) == amount then
      new_slice = true
      local seconds, keep, ttl = unpack(setting()[1 + i])
      redis.call('PEXPIRE', key, ttl)
      if redis.call('HLEN', key) > keep then trim(key, keep, tonumber(slice), seconds) end
    end
  end
  if new_slice then registered[#registered + 1] = ARGV[at] end
end

if #registered > 0 then
  -- Server time, so the index ages on the same clock as the keys' TTLs.
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local horizon = setting()[1]
  for _, name in ipairs(registered) do redis.call('ZADD', KEYS[1], ms, name) end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', ms - horizon))
  redis.call('PEXPIRE', KEYS[1], horizon)
end
return #registered
