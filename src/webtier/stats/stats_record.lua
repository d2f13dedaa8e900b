-- Record one value of one (context, type) in the current period, atomically,
-- in one slot. After stats_prelude.lua (server_period, created).
--
-- KEYS[1] = the record of (context, type) for the period starting at ARGV[2]: hash
--           count, sum, m2 (sum of squared deviations), min, max, errors,
--           and one field per histogram bucket
-- KEYS[2] = (ranked types only) the shard's contexts of that type and period: set
-- ARGV[1] = period length, seconds
-- ARGV[2] = the start of the period the caller expects (from its own clock)
-- ARGV[3] = complete periods kept besides the current one
-- ARGV[4] = the value, as a decimal that reads back as the same double
-- ARGV[5] = the value's histogram bucket, or '' without histograms
-- ARGV[6] = '1' if the sample comes from a failure (counted in errors), else '0'
-- ARGV[7] = (ranked) the context, listed in KEYS[2]
-- ARGV[8] = (ranked) the most contexts KEYS[2] lists
-- Returns {1, count, sum, m2} once recorded, or {0, start} without writing
-- anything when the server's clock puts now in the period starting at
-- `start`: the caller sends again with that period's keys.
--
-- The server's clock alone decides the period, so app servers whose clocks
-- disagree cannot split or flip a period. The first write of a period
-- creates its keys, which expire by themselves once `keep` newer periods
-- have passed. Mean and variance are kept as sum and m2 (Welford), which
-- stay exact where the book's sum of squares loses every digit to
-- cancellation (large values, small spread). A steady write is three calls
-- (TIME, HMGET, HSET); rankings are computed when read, from the records.

local period = tonumber(ARGV[1])
local start = server_period(period)
if start ~= tonumber(ARGV[2]) then return {0, start} end

local key, value, bucket = KEYS[1], ARGV[4], ARGV[5]
local x = tonumber(value)
-- The summary fields are the hash's first (a new record writes them first),
-- so finding them in a listpack of many buckets stays cheap.
local n, sum, m2, low, high, seen
if bucket ~= '' then
  n, sum, m2, low, high, seen = unpack(redis.call('HMGET', key, 'count', 'sum', 'm2', 'min', 'max', bucket))
else
  n, sum, m2, low, high = unpack(redis.call('HMGET', key, 'count', 'sum', 'm2', 'min', 'max'))
end
if n then
  n, sum = tonumber(n), tonumber(sum)
  local mean = sum / n
  n, sum = n + 1, sum + x
  m2 = tonumber(m2) + (x - mean) * (x - sum / n)
  if x < tonumber(low) then redis.call('HSET', key, 'min', value) end
  if x > tonumber(high) then redis.call('HSET', key, 'max', value) end
else
  n, sum, m2 = 1, x, 0
  redis.call('HSET', key, 'count', 0, 'sum', 0, 'm2', 0, 'min', value, 'max', value)
end
-- 17 significant digits read back as the same double (tostring keeps 14).
sum, m2 = string.format('%.17g', sum), string.format('%.17g', m2)
n = string.format('%d', n)
if bucket ~= '' then
  seen = string.format('%d', (tonumber(seen) or 0) + 1)
  redis.call('HSET', key, 'count', n, 'sum', sum, 'm2', m2, bucket, seen)
else
  redis.call('HSET', key, 'count', n, 'sum', sum, 'm2', m2)
end
if ARGV[6] == '1' then redis.call('HINCRBY', key, 'errors', 1) end

if n == '1' then
  created(key, start, period, tonumber(ARGV[3]), KEYS[2], ARGV[7], tonumber(ARGV[8]))
end
return {1, tonumber(n), sum, m2}
